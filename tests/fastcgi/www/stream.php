<?php
// Pieces flushed one by one, 300 ms apart: the first must reach the
// client long before the last is written.
while (ob_get_level() > 0)
    ob_end_flush();
header('Content-Type: text/plain');
for ($i = 0; $i < 5; $i++) {
    echo "piece $i ", str_repeat('x', 100), "\n";
    flush();
    usleep(300000);
}
echo "end\n";
