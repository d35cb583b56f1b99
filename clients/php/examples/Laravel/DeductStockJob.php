<?php

declare(strict_types=1);

namespace App\Jobs;

use App\Orders\OrderBook;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Invledger\Client;
use Invledger\Exception\InvledgerException;
use Invledger\Exception\NotFoundException;
use Invledger\Exception\UnavailableException;

/**
 * DeductStockJob creates the shop's order of a purchase, on invledger's
 * receipt. The controller buys with Invledger::deduct($sku, $user, $qty,
 * $requestId) to answer the buyer at once, and dispatches this job with the
 * same request id whatever the answer was, an UnavailableException
 * included: the job asks again with that id, which never buys twice and
 * answers the original receipt (or the refusal), and writes the order.
 *
 * While invledger is unavailable the job is released back to the queue and
 * tried later; once it has failed for good, failed() gives the units back,
 * so no unit stays sold without an order.
 */
final class DeductStockJob implements ShouldQueue
{
    use Dispatchable;
    use InteractsWithQueue;
    use Queueable;

    public int $tries = 5;

    public function __construct(
        public readonly string $sku,
        public readonly string $userId,
        public readonly int $qty,
        public readonly string $requestId,
    ) {
    }

    public function handle(Client $invledger, OrderBook $orders): void
    {
        try {
            $receipt = $invledger->deduct($this->sku, $this->userId, $this->qty, $this->requestId);
        } catch (UnavailableException $e) {
            $this->release($e->retryAfter);
            return;
        } catch (InvledgerException $e) {
            // sold_out, already_purchased, closed, ...: nothing was sold.
            $orders->refuse($this->requestId, $this->sku, $this->userId, $e->errorCode);
            return;
        }
        if ($receipt->released) {
            return; // sold, then given back (by failed() of an earlier run, or a refund): no order
        }
        $orders->record($this->requestId, $this->sku, $this->userId, $this->qty, $receipt);
    }

    /** failed gives the units back when the order could not be written. */
    public function failed(\Throwable $e): void
    {
        $reason = 'order not created: ' . preg_replace('/[^\x20-\x7E]+/', ' ', substr($e->getMessage(), 0, 200));
        try {
            app(Client::class)->release($this->sku, $this->userId, $this->requestId, $reason);
        } catch (NotFoundException) {
            // the purchase was never made: nothing to give back
        }
    }
}
