<?php
// The request body as PHP reads it: the length it was told, the bytes it
// got and their hash (tests/fastcgi/run.py: bodies of unknown length).
header('Content-Type: text/plain');
$in = file_get_contents('php://input');
echo "content_length=", $_SERVER['CONTENT_LENGTH'] ?? '-', "\n";
echo "read=", strlen($in), "\n";
echo "sha256=", hash('sha256', $in), "\n";
echo "te=", $_SERVER['HTTP_TRANSFER_ENCODING'] ?? '-', "\n";
