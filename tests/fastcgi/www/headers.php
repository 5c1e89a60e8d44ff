<?php
// Status and fields set by the application.
$mode = $_GET['mode'] ?? '';
header('X-App: set-by-php');
header('Set-Cookie: a=1');
header('Set-Cookie: b=2', false);
if ($mode === '404') {
    http_response_code(404);
    echo "not here\n";
} elseif ($mode === 'redirect') {
    header('Location: /elsewhere');
} elseif ($mode === 'status') {
    header('Status: 503 Busy');
    echo "busy\n";
} else {
    echo "ok\n";
}
