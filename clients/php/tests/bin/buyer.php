<?php

declare(strict_types=1);

// buyer.php SKU FIRST COUNT: one gateway process of SaleTest. It buys one
// unit of SKU for each of the users buyer-FIRST .. buyer-(FIRST+COUNT-1),
// one after another, and prints one JSON line per purchase: the user and
// the receipt, or the error code of the refusal.
require __DIR__ . '/../bootstrap.php';

use Invledger\Exception\InvledgerException;
use Invledger\Tests\Stack;

[, $sku, $first, $count] = $argv;
$inv = Stack::gateway(new \Invledger\Options(deadline: 30.0));
for ($i = (int) $first; $i < (int) $first + (int) $count; $i++) {
    $user = 'buyer-' . $i;
    try {
        $r = $inv->deduct($sku, $user, 1, 'sale-' . $user);
        echo json_encode(['user' => $user, 'outcome' => 'ok', 'seq' => $r->seq, 'remaining' => $r->remaining]), "\n";
    } catch (InvledgerException $e) {
        echo json_encode(['user' => $user, 'outcome' => $e->errorCode]), "\n";
    }
}
