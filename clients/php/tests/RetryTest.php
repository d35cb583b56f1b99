<?php

declare(strict_types=1);

namespace Invledger\Tests;

use GuzzleHttp\Psr7\HttpFactory;
use GuzzleHttp\Psr7\Response;
use Invledger\Client;
use Invledger\Exception;
use Invledger\Options;
use PHPUnit\Framework\TestCase;
use Psr\Http\Client\ClientInterface;
use Psr\Http\Message\RequestInterface;
use Psr\Http\Message\ResponseInterface;

/**
 * RetryTest holds the client's pure logic to its contract with canned
 * answers: which answers are retried, how long it waits, what the retries
 * send, and which exception each error code becomes. The real serve's
 * answers are ClientTest's, SaleTest's and KillServeTest's.
 */
final class RetryTest extends TestCase
{
    public function testA503IsRetriedAfterItsRetryAfterWithTheSameRequest(): void
    {
        $http = new CannedHttp([
            new Response(503, ['Retry-After' => '2', 'Content-Type' => 'application/json'],
                '{"error":"unavailable","detail":"redis is unavailable","trace_id":"t1"}'),
            new Response(200, ['Content-Type' => 'application/json', 'Idempotent-Replayed' => 'true', 'X-Request-Id' => 't2'],
                '{"status":"ok","seq":7,"remaining":3,"event_id":"0b0b0b0b-0000-4000-8000-000000000000"}'),
        ]);
        $slept = [];
        $inv = $this->client($http, new Options(deadline: 10.0, sleep: static function (float $s) use (&$slept): void {
            $slept[] = $s;
        }));
        $r = $inv->deduct('sku-1', 'ann', 1, 'req-9');
        self::assertSame([7, 3, true, 't2'], [$r->seq, $r->remaining, $r->replayed, $r->traceId]);
        self::assertSame([2.0], $slept, 'the wait is the answer\'s Retry-After');
        self::assertCount(2, $http->sent);
        foreach ($http->sent as $req) {
            self::assertSame('req-9', $req->getHeaderLine('Idempotency-Key'));
            self::assertSame('{"user_id":"ann","qty":1,"request_id":"req-9"}', (string) $req->getBody());
            self::assertSame('/v1/skus/sku-1/deduct', $req->getUri()->getPath());
        }
    }

    public function testARequestIdTheHeaderCannotCarryGoesInTheBodyAlone(): void
    {
        $ok = static fn () => new Response(200, ['Content-Type' => 'application/json'],
            '{"status":"ok","seq":1,"remaining":9,"event_id":"0b0b0b0b-0000-4000-8000-000000000000"}');
        $http = new CannedHttp([$ok(), $ok()]);
        $inv = $this->client($http, new Options());
        $inv->deduct('sku-1', 'ann', 1, 'café-1');
        $inv->deduct('sku-1', 'ann', 1, 'plain-1');
        self::assertFalse($http->sent[0]->hasHeader('Idempotency-Key'), 'the server takes visible ASCII keys only');
        self::assertSame('{"user_id":"ann","qty":1,"request_id":"café-1"}', (string) $http->sent[0]->getBody());
        self::assertSame('plain-1', $http->sent[1]->getHeaderLine('Idempotency-Key'));
        try {
            $inv->call('POST', '/v1/reconcile', ['sku' => 'sku-1'], 'clé');
            self::fail('no exception');
        } catch (\InvalidArgumentException $e) {
            self::assertStringContainsString('visible ASCII', $e->getMessage());
        }
        self::assertCount(2, $http->sent, 'a call whose key the server would refuse is not sent');
    }

    public function testAnAnswerPastTheDeadlineIsAnUnavailableExceptionWithTheRequestId(): void
    {
        $busy = static fn () => new Response(503, ['Retry-After' => '3'], '{"error":"recovering","detail":"checking the sku","trace_id":"t"}');
        $http = new CannedHttp([$busy(), $busy(), $busy()]);
        $slept = 0.0;
        $inv = $this->client($http, new Options(deadline: 1.0, maxRetryWait: 5.0, sleep: static function (float $s) use (&$slept): void {
            $slept += $s;
        }));
        try {
            $inv->reserve('sku-1', 'ann', 1, 'req-3');
            self::fail('no exception');
        } catch (Exception\RecoveringException $e) {
            self::assertInstanceOf(Exception\UnavailableException::class, $e);
            self::assertSame([3, 'req-3', 503], [$e->retryAfter, $e->requestId, $e->status]);
            self::assertStringContainsString('retry with request id req-3', $e->getMessage());
        }
        self::assertCount(1, $http->sent, 'a Retry-After beyond the deadline is not waited for');
        self::assertSame(0.0, $slept);
    }

    public function testRefusalsAreNotRetried(): void
    {
        $http = new CannedHttp([new Response(409, [], '{"error":"sold_out","detail":"sold out","trace_id":"t"}')]);
        $this->expectException(Exception\SoldOutException::class);
        try {
            $this->client($http, new Options())->deduct('sku-1', 'ann');
        } finally {
            self::assertCount(1, $http->sent);
        }
    }

    public function testEveryErrorCodeBecomesItsClass(): void
    {
        foreach (Exception\InvledgerException::BY_CODE as $code => $class) {
            $e = Exception\InvledgerException::fromAnswer(409, ['error' => $code, 'detail' => 'why', 'field' => 'qty', 'trace_id' => 'tr'], '', null, 4, 'rq');
            self::assertSame($class, get_class($e), $code);
            self::assertSame([$code, 'why', 'qty', 'tr', 'rq'], [$e->errorCode, $e->detail, $e->field, $e->traceId, $e->requestId]);
            self::assertSame('qty: why (HTTP 409 ' . $code . ', trace tr)', strtok($e->getMessage(), ';'));
            if ($e instanceof Exception\UnavailableException) {
                self::assertSame(4, $e->retryAfter, $code);
            }
        }
        $proxy = Exception\InvledgerException::fromAnswer(502, null, '<html>bad gateway</html>', 'tx', null, null);
        self::assertInstanceOf(Exception\UnexpectedResponseException::class, $proxy);
        self::assertSame(['http_error', '<html>bad gateway</html>'], [$proxy->errorCode, $proxy->detail]);
    }

    public function testConfigurationMistakesAreNamed(): void
    {
        try {
            Client::create('localhost:8080', '');
            self::fail('no exception');
        } catch (\InvalidArgumentException $e) {
            self::assertStringContainsString('baseUrl must be an http:// or https:// URL', $e->getMessage());
            self::assertStringContainsString('token is required', $e->getMessage());
        }
        $this->expectExceptionMessage('deadline must be above 0 seconds');
        new Options(deadline: 0);
    }

    public function testAnArgumentThatIsNotUtf8IsRefusedBeforeAnythingIsSent(): void
    {
        $http = new CannedHttp([]);
        try {
            $this->client($http, new Options())->deduct('sku-1', "ann\xff");
            self::fail('no exception');
        } catch (\InvalidArgumentException $e) {
            self::assertStringContainsString('user_id is not valid UTF-8', $e->getMessage());
        }
        try {
            $this->client($http, new Options())->placeOrder('o-1', 'ann', ['sku-1' => 1, "sku-\xff" => 1]);
            self::fail('no exception');
        } catch (\InvalidArgumentException $e) {
            self::assertStringContainsString('lines[1].sku is not valid UTF-8', $e->getMessage());
        }
        self::assertSame([], $http->sent);
    }

    private function client(ClientInterface $http, Options $options): Client
    {
        $f = new HttpFactory();
        return new Client($http, $f, $f, 'http://invledger.test', 'tok', $options);
    }
}

/** CannedHttp answers the given responses in order and keeps the requests. */
final class CannedHttp implements ClientInterface
{
    /** @var list<RequestInterface> */
    public array $sent = [];

    /** @param list<ResponseInterface> $answers */
    public function __construct(private array $answers)
    {
    }

    public function sendRequest(RequestInterface $request): ResponseInterface
    {
        $this->sent[] = $request;
        return array_shift($this->answers) ?? throw new \LogicException('no answer left');
    }
}
