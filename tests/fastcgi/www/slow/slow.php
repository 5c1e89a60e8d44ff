<?php
// Longer than the route's read_timeout: keel answers 504.
sleep(3);
echo "too late\n";
