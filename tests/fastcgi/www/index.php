<?php
// A front controller: every path of its route lands here.
header('Content-Type: text/plain');
echo "front controller\n";
echo "REQUEST_URI=", $_SERVER['REQUEST_URI'], "\n";
echo "SCRIPT_NAME=", $_SERVER['SCRIPT_NAME'], "\n";
echo "DOCUMENT_URI=", $_SERVER['DOCUMENT_URI'], "\n";
