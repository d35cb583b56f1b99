<?php

// response()->json() needs the view factory; the shop has no templates.
return [
    'paths' => [],
    'compiled' => (string) realpath(storage_path()),
];
