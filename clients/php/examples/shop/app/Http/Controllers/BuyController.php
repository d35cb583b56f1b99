<?php

declare(strict_types=1);

namespace App\Http\Controllers;

use App\Jobs\DeductStockJob;
use Illuminate\Http\Request;
use Invledger\Exception\InvledgerException;
use Invledger\Exception\UnavailableException;
use Invledger\Laravel\Facades\Invledger;

/** BuyController is docs/php.md's controller, as written there. */
final class BuyController
{
    public function buy(Request $request, string $sku)
    {
        $requestId = $request->input('checkout_id');
        try {
            $receipt = Invledger::deduct($sku, (string) $request->user()->id, 1, $requestId);
        } catch (UnavailableException $e) {
            DeductStockJob::dispatch($sku, (string) $request->user()->id, 1, $requestId);
            return response()->json(['status' => 'pending'], 202);
        } catch (InvledgerException $e) {
            return response()->json(['status' => $e->errorCode], 409);
        }
        DeductStockJob::dispatch($sku, (string) $request->user()->id, 1, $requestId);
        return response()->json(['status' => 'ok', 'remaining' => $receipt->remaining]);
    }
}
