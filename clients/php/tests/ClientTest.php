<?php

declare(strict_types=1);

namespace Invledger\Tests;

use Invledger\Client;
use Invledger\Exception;
use Invledger\Options;
use PHPUnit\Framework\TestCase;

/**
 * ClientTest calls every method of the client against the real serve of
 * the private stack, and makes the API answer every refusal a gateway can
 * meet.
 */
final class ClientTest extends TestCase
{
    public function testDeductAnswersTheOriginalReceiptToARetry(): void
    {
        $sku = Stack::sku('deduct', 10, 2);
        $inv = Stack::gateway();
        $r = $inv->deduct($sku, 'ann', 2, 'ann-1');
        self::assertSame(['ann-1', 2, 8, false, false], [$r->requestId, $r->seq, $r->remaining, $r->replayed, $r->released],
            'seq 1 is the warm\'s stocking');
        self::assertMatchesRegularExpression('/^[0-9a-f-]{36}$/', $r->eventId);
        self::assertNotNull($r->traceId);

        $again = $inv->deduct($sku, 'ann', 2, 'ann-1');
        self::assertTrue($again->replayed);
        self::assertSame([$r->seq, $r->remaining, $r->eventId], [$again->seq, $again->remaining, $again->eventId]);

        $generated = $inv->deduct($sku, 'bob');
        self::assertMatchesRegularExpression('/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/', $generated->requestId);
        self::assertSame(7, $generated->remaining);
        self::assertTrue($inv->deduct($sku, 'bob', 1, $generated->requestId)->replayed);
    }

    public function testReleaseGivesUnitsBackOnce(): void
    {
        $sku = Stack::sku('release', 3);
        $inv = Stack::gateway();
        $bought = $inv->deduct($sku, 'cid', 1, 'cid-1');
        $rel = $inv->release($sku, 'cid', 'cid-1', 'refund');
        self::assertFalse($rel->alreadyReleased);
        self::assertSame($bought->seq + 1, $rel->seq);
        self::assertTrue($inv->release($sku, 'cid', 'cid-1')->alreadyReleased);
        $replay = $inv->deduct($sku, 'cid', 1, 'cid-1');
        self::assertTrue($replay->replayed && $replay->released);
        self::assertSame(3, Stack::view($sku)['redis_stock']);
    }

    public function testHoldsAreReservedConfirmedAndCancelled(): void
    {
        $sku = Stack::sku('holds', 5, 3);
        $inv = Stack::gateway();
        $h = $inv->reserve($sku, 'dee', 2, 'dee-hold-1', 60);
        self::assertSame(['held', 3, 2, 'dee-hold-1', false], [$h->status, $h->remaining, $h->qty, $h->requestId, $h->replayed]);
        self::assertGreaterThan(new \DateTimeImmutable('+50 seconds'), $h->expiresAt);
        self::assertTrue($inv->reserve($sku, 'dee', 2, 'dee-hold-1', 60)->replayed);
        self::assertSame('held', $inv->getHold($sku, $h->holdId)->status);
        self::assertSame('confirmed', $inv->confirmHold($sku, $h->holdId)->status);
        self::assertSame('confirmed', $inv->confirmHold($sku, $h->holdId)->status, 'a repeated confirm answers the same');

        $other = $inv->reserve($sku, 'dee', 1);
        self::assertSame('cancelled', $inv->cancelHold($sku, $other->holdId)->status);
        self::assertSame('cancelled', $inv->getHold($sku, $other->holdId)->status);
        self::assertSame(3, Stack::view($sku)['redis_stock']);
    }

    public function testOrdersArePlacedConfirmedAndCancelledWhole(): void
    {
        $a = Stack::sku('order-a', 5, 2);
        $b = Stack::sku('order-b', 5);
        $inv = Stack::gateway();
        $o = $inv->placeOrder('order-' . $a, 'eve', [$a => 1, $b => 1], 120);
        self::assertTrue($o->created);
        self::assertSame('held', $o->status);
        self::assertSame([$a, $b], array_map(static fn ($l) => $l->sku, $o->lines));
        $retry = $inv->placeOrder('order-' . $a, 'eve', [$a => 1, $b => 1], 120);
        self::assertFalse($retry->created);
        self::assertSame($o->lines[0]->holdId, $retry->lines[0]->holdId);
        self::assertSame('held', $inv->getOrder($o->orderId)->status);
        self::assertSame('confirmed', $inv->confirmOrder($o->orderId)->status);

        $o2 = $inv->placeOrder('order2-' . $a, 'fay', [$a => 2, $b => 1]);
        $cancelled = $inv->cancelOrder($o2->orderId);
        self::assertSame('cancelled', $cancelled->status);
        self::assertSame(['cancelled', 'cancelled'], array_map(static fn ($l) => $l->status, $cancelled->lines));
        self::assertSame(4, Stack::view($a)['redis_stock']);
    }

    /**
     * testEveryRefusalMapsToItsException makes serve answer each refusal
     * and checks its class, code, status, field and trace id.
     */
    public function testEveryRefusalMapsToItsException(): void
    {
        $inv = Stack::gateway();
        $one = Stack::sku('refusals', 1);
        $inv->deduct($one, 'gus', 1, 'gus-1');
        $this->refused(Exception\SoldOutException::class, 'sold_out', 409, static fn () => $inv->deduct($one, 'hal', 1, 'hal-1'));

        $limited = Stack::sku('limited', 10);
        $inv->deduct($limited, 'gus', 1, 'gus-2');
        $this->refused(Exception\AlreadyPurchasedException::class, 'already_purchased', 409, static fn () => $inv->deduct($limited, 'gus', 1, 'gus-3'));
        $this->refused(Exception\ConflictException::class, 'conflict', 409, static fn () => $inv->deduct($limited, 'ida', 1, 'gus-2'));
        $this->refused(Exception\InvalidRequestException::class, 'invalid_request', 400, static fn () => $inv->deduct($limited, 'ida', 0), 'qty');

        $cold = Stack::sku('cold', 10, 1, false);
        $this->refused(Exception\NotWarmedException::class, 'not_warmed', 409, static fn () => $inv->deduct($cold, 'ida', 1));
        $this->refused(Exception\NotFoundException::class, 'not_found', 404, static fn () => $inv->deduct('never-defined-' . bin2hex(random_bytes(4)), 'ida', 1));
        $this->refused(Exception\NotFoundException::class, 'not_found', 404, static fn () => $inv->getOrder('no-such-order'));

        $closing = Stack::sku('closing', 10);
        $bought = $inv->deduct($closing, 'jon', 1, 'jon-1');
        Stack::operator()->call('POST', '/v1/skus/' . $closing . '/close');
        $this->refused(Exception\ClosedException::class, 'closed', 409, static fn () => $inv->deduct($closing, 'kim', 1));
        self::assertSame($bought->seq, $inv->deduct($closing, 'jon', 1, 'jon-1')->seq, 'a retry after the close gets its receipt');

        $retiring = Stack::sku('retiring', 10);
        $inv->deduct($retiring, 'ron', 1, 'ron-1');
        Stack::operator()->call('POST', '/v1/skus/' . $retiring . '/close');
        $holds = Stack::sku('hold-refusals', 10, 5);
        $short = $inv->reserve($holds, 'lea', 1, null, 1);
        $confirmed = $inv->reserve($holds, 'lea', 1);
        $inv->confirmHold($holds, $confirmed->holdId);
        $this->refused(Exception\HoldConfirmedException::class, 'hold_confirmed', 409, static fn () => $inv->cancelHold($holds, $confirmed->holdId));
        $cancelled = $inv->reserve($holds, 'lea', 1);
        $inv->cancelHold($holds, $cancelled->holdId);
        $this->refused(Exception\HoldCancelledException::class, 'hold_cancelled', 409, static fn () => $inv->confirmHold($holds, $cancelled->holdId));
        $released = $inv->reserve($holds, 'lea', 1);
        $inv->confirmHold($holds, $released->holdId);
        $inv->release($holds, 'lea', (string) $released->requestId);
        $this->refused(Exception\HoldReleasedException::class, 'hold_released', 409, static fn () => $inv->cancelHold($holds, $released->holdId));
        Stack::waitFor('the one-second hold to expire', static fn (): bool => $inv->getHold($holds, $short->holdId)->status === 'expired');
        $this->refused(Exception\HoldExpiredException::class, 'hold_expired', 409, static fn () => $inv->confirmHold($holds, $short->holdId));

        Stack::waitFor("$retiring retired", static fn (): bool => Stack::view($retiring)['state'] === 'retired');
        $this->refused(Exception\RetiredException::class, 'retired', 409, static fn () => $inv->release($retiring, 'ron', 'ron-1'));
        self::assertTrue($inv->deduct($retiring, 'ron', 1, 'ron-1')->replayed, 'a retry after the retirement gets its receipt');

        $stranger = Client::create(Stack::url(), 'not-a-known-token', new Options(deadline: 2.0));
        $e = $this->refused(Exception\UnauthorizedException::class, 'unauthorized', 401, static fn () => $stranger->deduct($limited, 'max', 1));
        self::assertStringNotContainsString('not-a-known-token', $e->getMessage() . $e->getTraceAsString());
        $this->refused(Exception\ForbiddenException::class, 'forbidden', 403, static fn () => Stack::operator()->deduct($limited, 'max', 1));
    }

    public function testA503OfAStalledRedisIsRetriedUntilThePurchaseIsMadeOnce(): void
    {
        $sku = Stack::sku('stall', 10);
        $logs = new MemoryLogger();
        $inv = Stack::gateway(new Options(deadline: 15.0, logger: $logs));
        Stack::pauseRedis(1.5);
        $r = $inv->deduct($sku, 'olga', 1, 'olga-1');
        self::assertNotEmpty($logs->lines, 'no 503 met');
        self::assertMatchesRegularExpression('/"error":"(unavailable|recovering|unsafe_redis)"/', $logs->lines[0], 'a 503 was retried');
        self::assertSame(9, $r->remaining);
        self::assertSame($r->seq, $inv->deduct($sku, 'olga', 1, 'olga-1')->seq);
        self::assertSame(9, Stack::view($sku)['redis_stock'], 'bought once, whichever try made it');
    }

    public function testARetryThatMeetsNoServerSaysToRetryWithTheRequestId(): void
    {
        $sock = stream_socket_server('tcp://127.0.0.1:0');
        $addr = stream_socket_get_name($sock, false);
        fclose($sock); // nothing listens there now
        $logs = new MemoryLogger();
        $inv = Client::create('http://' . $addr, 'secret-that-must-not-leak', new Options(deadline: 0.5, retryWait: 0.05, logger: $logs));
        try {
            $inv->deduct('sku-x', 'ned', 1, 'ned-1');
            self::fail('bought from a server that does not exist');
        } catch (Exception\ConnectionException $e) {
            self::assertSame(['connection', 'ned-1', 0], [$e->errorCode, $e->requestId, $e->status]);
            self::assertStringContainsString('retry with request id ned-1', $e->getMessage());
            self::assertStringNotContainsString('secret-that-must-not-leak', $e->getMessage() . $e->getTraceAsString());
        }
        self::assertNotEmpty($logs->lines, 'the retries were not logged');
        self::assertStringNotContainsString('secret-that-must-not-leak', implode("\n", $logs->lines) . print_r($inv, true));
    }

    /**
     * refused runs $call, which must throw $class with $code and $status,
     * and returns the exception.
     *
     * @template T of Exception\InvledgerException
     * @param class-string<T> $class
     * @return T
     */
    private function refused(string $class, string $code, int $status, \Closure $call, ?string $field = null): Exception\InvledgerException
    {
        try {
            $call();
        } catch (Exception\InvledgerException $e) {
            self::assertInstanceOf($class, $e, $e->getMessage());
            self::assertSame([$code, $status], [$e->errorCode, $e->status], $e->getMessage());
            self::assertNotSame('', $e->detail);
            self::assertNotEmpty($e->traceId, 'the trace id of ' . $code);
            if ($field !== null) {
                self::assertSame($field, $e->field);
            }
            return $e;
        }
        self::fail("no $code");
    }
}
