<?php
// What the application sees: the parameters as JSON (tests/fastcgi/run.py).
header('Content-Type: application/json');
$keys = ['SCRIPT_FILENAME', 'SCRIPT_NAME', 'PATH_INFO', 'QUERY_STRING', 'REQUEST_METHOD',
         'REQUEST_URI', 'DOCUMENT_URI', 'DOCUMENT_ROOT', 'SERVER_PROTOCOL', 'REQUEST_SCHEME',
         'GATEWAY_INTERFACE', 'SERVER_SOFTWARE', 'REMOTE_ADDR', 'REMOTE_PORT', 'SERVER_ADDR',
         'SERVER_PORT', 'SERVER_NAME', 'HTTPS', 'HTTP_X_FOO', 'HTTP_PROXY', 'HTTP_HOST',
         'HTTP_COOKIE', 'CONTENT_TYPE', 'CONTENT_LENGTH', 'KEEL_TEST'];
$out = [];
foreach ($keys as $k)
    $out[$k] = isset($_SERVER[$k]) ? $_SERVER[$k] : null;
$out['pid'] = getmypid();
$out['body_length'] = strlen(file_get_contents('php://input'));
echo json_encode($out);
