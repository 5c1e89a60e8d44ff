<?php
// error_log() with no error_log file set goes to FastCGI's stderr.
error_log('keel-fcgi-stderr-marker ' . ($_GET['n'] ?? ''));
echo "logged\n";
