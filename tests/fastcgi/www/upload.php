<?php
// A form with a file: its size and hash echoed back.
header('Content-Type: text/plain');
$f = $_FILES['file'] ?? null;
if ($f === null || $f['error'] !== UPLOAD_ERR_OK) {
    http_response_code(400);
    echo "no file: ", $f ? $f['error'] : 'none', "\n";
    exit;
}
echo "name=", $_POST['name'] ?? '', "\n";
echo "size=", $f['size'], "\n";
echo "sha256=", hash_file('sha256', $f['tmp_name']), "\n";
