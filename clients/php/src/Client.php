<?php

declare(strict_types=1);

namespace Invledger;

use Invledger\Exception\ConnectionException;
use Invledger\Exception\InvledgerException;
use Invledger\Exception\UnavailableException;
use Invledger\Exception\UnexpectedResponseException;
use Psr\Http\Client\ClientExceptionInterface;
use Psr\Http\Client\ClientInterface;
use Psr\Http\Message\RequestFactoryInterface;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\StreamFactoryInterface;

/**
 * Client calls the invledger HTTP API as one token: a method for every
 * route a gateway token may call, named after the route's operationId in
 * docs/openapi.yaml, typed results, and one exception class per error code
 * (Invledger\Exception\*, under InvledgerException).
 *
 * Every call is retried on a 503 (after its Retry-After) and on a transport
 * error, with the same request id, until Options::$deadline: purchases and
 * reserves by their request id, orders by their order id, and confirm,
 * cancel and reads because a repeat answers the same. A call that outlasts
 * the deadline throws UnavailableException (ConnectionException when no
 * answer came) carrying the request id to retry with later.
 *
 * It keeps no global state and is safe to share. The token appears in no
 * exception (message, properties or trace arguments), log line, dump,
 * var_export, array cast or reflection of its properties: it is kept in
 * the frame of a suspended generator (see secretCell), every parameter that
 * takes it is a SensitiveParameter, a Client refuses to be serialized, and
 * every text of an answer or transport error that goes into an exception
 * has the token and any "Bearer <credential>" replaced by "(hidden)".
 */
final class Client
{
    private readonly string $base;
    private readonly Options $options;
    /** The token's cell: see secretCell. */
    private readonly \Generator $secret;

    /**
     * @param ClientInterface         $http     any PSR-18 client (Client::create uses Guzzle)
     * @param RequestFactoryInterface $requests a PSR-17 request factory
     * @param StreamFactoryInterface  $streams  a PSR-17 stream factory
     * @param string                  $baseUrl  the API's, e.g. http://127.0.0.1:8080
     * @param string                  $token    a gateway token's secret
     */
    public function __construct(
        private readonly ClientInterface $http,
        private readonly RequestFactoryInterface $requests,
        private readonly StreamFactoryInterface $streams,
        string $baseUrl,
        #[\SensitiveParameter] string $token,
        ?Options $options = null,
    ) {
        $u = parse_url($baseUrl);
        $errs = [];
        if ($u === false || !in_array($u['scheme'] ?? '', ['http', 'https'], true) || ($u['host'] ?? '') === '') {
            $errs[] = 'baseUrl must be an http:// or https:// URL such as http://127.0.0.1:8080';
        }
        if ($token === '') {
            $errs[] = 'token is required: the secret of a gateway token (INVLEDGER_TOKEN)';
        } elseif (preg_match('/[\x00-\x1f\x7f]/', $token) === 1) {
            // It could not be sent as a header, and an HTTP library's
            // refusal would quote the header's value.
            $errs[] = 'token must not contain control characters or line breaks';
        }
        if ($errs !== []) {
            throw new \InvalidArgumentException('invledger client: ' . implode('; ', $errs));
        }
        $this->base = rtrim($baseUrl, '/');
        $this->options = $options ?? new Options();
        $this->secret = self::secretCell($token);
    }

    /**
     * create returns a client that sends with Guzzle (guzzlehttp/guzzle 7).
     *
     * @param string                       $baseUrl the API's, e.g. http://127.0.0.1:8080
     * @param string                       $token   a gateway token's secret
     * @param Options|array<string,mixed>  $options Options, or an array for Options::fromArray (such as
     *                                              config('invledger'), which holds the token: it is a
     *                                              SensitiveParameter too)
     */
    public static function create(string $baseUrl, #[\SensitiveParameter] string $token, #[\SensitiveParameter] Options|array $options = []): self
    {
        if (!class_exists(\GuzzleHttp\Client::class)) {
            throw new \LogicException('invledger client: Client::create needs guzzlehttp/guzzle; or pass any PSR-18 client and PSR-17 factories to new Client(...)');
        }
        $opts = is_array($options) ? Options::fromArray($options) : $options;
        $factory = new \GuzzleHttp\Psr7\HttpFactory();
        $http = new \GuzzleHttp\Client([
            'timeout' => $opts->timeout,
            'connect_timeout' => min($opts->timeout, 2.0),
            'http_errors' => false,
            'allow_redirects' => false,
        ]);
        return new self($http, $factory, $factory, $baseUrl, $token, $opts);
    }

    /**
     * deduct buys $qty units of $sku for $userId. $requestId is the
     * purchase's idempotency key (one is generated when null): a retry with
     * it, now or later, returns the original receipt ($replayed) and never
     * buys twice.
     *
     * @throws Exception\SoldOutException          fewer units left than asked
     * @throws Exception\AlreadyPurchasedException the user reached the per-user limit
     * @throws Exception\NotWarmedException        the sale has not started
     * @throws Exception\ClosedException           the sale has ended
     * @throws Exception\ConflictException         $requestId was used with another user or quantity
     * @throws UnavailableException                no definite answer by the deadline: retry with $e->requestId
     */
    public function deduct(string $sku, string $userId, int $qty = 1, ?string $requestId = null): DeductReceipt
    {
        $requestId ??= self::newRequestId();
        [$b, $res] = $this->send('POST', self::skuPath($sku) . '/deduct',
            ['user_id' => $userId, 'qty' => $qty, 'request_id' => $requestId], $requestId, $requestId);
        return new DeductReceipt($requestId, (int) $b['seq'], (int) $b['remaining'], (string) $b['event_id'],
            $res->getHeaderLine('Idempotent-Replayed') === 'true', $res->getHeaderLine('Invledger-Released') === 'true',
            self::traceId($res));
    }

    /**
     * release gives back the units of the purchase $requestId made, once;
     * releasing it again answers $alreadyReleased.
     *
     * @throws Exception\NotFoundException no purchase by that request id
     * @throws Exception\RetiredException  the SKU was retired after its sale
     */
    public function release(string $sku, string $userId, string $requestId, ?string $reason = null): ReleaseReceipt
    {
        $body = ['user_id' => $userId, 'request_id' => $requestId];
        if ($reason !== null) {
            $body['reason'] = $reason;
        }
        [$b, $res] = $this->send('POST', self::skuPath($sku) . '/release', $body, $requestId, $requestId);
        return new ReleaseReceipt($requestId, (int) $b['seq'], (string) $b['event_id'], (bool) $b['already_released'], self::traceId($res));
    }

    /**
     * reserve holds $qty units of $sku for $userId for $ttlSeconds (null:
     * the server's default), running every check deduct runs. $requestId is
     * the idempotency key (generated when null): a retry answers the same
     * hold in its state now.
     */
    public function reserve(string $sku, string $userId, int $qty = 1, ?string $requestId = null, ?int $ttlSeconds = null): Hold
    {
        $requestId ??= self::newRequestId();
        $body = ['user_id' => $userId, 'qty' => $qty, 'request_id' => $requestId];
        if ($ttlSeconds !== null) {
            $body['ttl_seconds'] = $ttlSeconds;
        }
        [$b, $res] = $this->send('POST', self::skuPath($sku) . '/holds', $body, $requestId, $requestId);
        return Hold::fromArray($b, $requestId, $res->getHeaderLine('Idempotent-Replayed') === 'true', self::traceId($res));
    }

    /** getHold reads a hold; one past its deadline reads as expired. */
    public function getHold(string $sku, string $holdId): Hold
    {
        [$b, $res] = $this->send('GET', self::holdPath($sku, $holdId), null, null, null);
        return Hold::fromArray($b, null, false, self::traceId($res));
    }

    /**
     * confirmHold makes the hold a sale, once; confirming again answers the
     * same.
     *
     * @throws Exception\HoldExpiredException   the deadline passed
     * @throws Exception\HoldCancelledException it was cancelled
     * @throws Exception\HoldReleasedException  it was confirmed and released since
     */
    public function confirmHold(string $sku, string $holdId): Hold
    {
        [$b, $res] = $this->send('POST', self::holdPath($sku, $holdId) . '/confirm', null, null, null);
        return Hold::fromArray($b, null, false, self::traceId($res));
    }

    /**
     * cancelHold gives the hold's units and the buyer's allowance back, once.
     *
     * @throws Exception\HoldConfirmedException it was confirmed (release the purchase instead)
     * @throws Exception\HoldExpiredException   the deadline passed
     */
    public function cancelHold(string $sku, string $holdId): Hold
    {
        [$b, $res] = $this->send('POST', self::holdPath($sku, $holdId) . '/cancel', null, null, null);
        return Hold::fromArray($b, null, false, self::traceId($res));
    }

    /**
     * placeOrder reserves every line of an order, or none. $lines maps SKU
     * ids to quantities, in order. $orderId is the idempotency key: a retry
     * with the same lines answers the order in its state now ($created
     * false). A refused line throws its reason's exception with $field
     * "lines[i]".
     *
     * @param array<string,int> $lines
     */
    public function placeOrder(string $orderId, string $userId, array $lines, ?int $ttlSeconds = null): Order
    {
        $wire = [];
        foreach ($lines as $sku => $qty) {
            $wire[] = ['sku' => (string) $sku, 'qty' => $qty];
        }
        $body = ['order_id' => $orderId, 'user_id' => $userId, 'lines' => $wire];
        if ($ttlSeconds !== null) {
            $body['ttl_seconds'] = $ttlSeconds;
        }
        [$b, $res] = $this->send('POST', '/v1/orders', $body, $orderId, $orderId);
        return Order::fromArray($b, $res->getStatusCode() === 201, self::traceId($res));
    }

    /** getOrder reads an order's state, derived from its lines' holds. */
    public function getOrder(string $orderId): Order
    {
        [$b, $res] = $this->send('GET', self::orderPath($orderId), null, null, null);
        return Order::fromArray($b, false, self::traceId($res));
    }

    /**
     * confirmOrder confirms every line, or none: a line that expired or was
     * cancelled throws its exception ($field names it) and the other lines
     * are undone.
     */
    public function confirmOrder(string $orderId): Order
    {
        [$b, $res] = $this->send('POST', self::orderPath($orderId) . '/confirm', null, null, null);
        return Order::fromArray($b, false, self::traceId($res));
    }

    /** cancelOrder cancels every line still held. */
    public function cancelOrder(string $orderId): Order
    {
        [$b, $res] = $this->send('POST', self::orderPath($orderId) . '/cancel', null, null, null);
        return Order::fromArray($b, false, self::traceId($res));
    }

    /**
     * call sends $method $path (with $body as JSON when not null) and returns
     * the decoded answer: the way to a route this client has no method for,
     * such as an operator's. It is retried like the others only when
     * $idempotencyKey is given, which it sends as Idempotency-Key.
     *
     * @param array<string,mixed>|null $body
     * @return array<string,mixed>
     */
    public function call(string $method, string $path, ?array $body = null, ?string $idempotencyKey = null): array
    {
        if ($idempotencyKey !== null && !self::headerKey($idempotencyKey)) {
            // Retried without a key the server holds, a write could apply twice.
            throw new \InvalidArgumentException('invledger client: the idempotency key must be 1-128 visible ASCII characters, spaces only inside');
        }
        return $this->send($method, $path, $body, $idempotencyKey, $idempotencyKey, $idempotencyKey !== null)[0];
    }

    /**
     * headerKey says whether $key can be an Idempotency-Key: 1-128 visible
     * ASCII characters, spaces inside but at neither end, as the server
     * takes it (the IETF draft's Structured Field string).
     */
    private static function headerKey(string $key): bool
    {
        return preg_match('/^[!-~](?:[ -~]{0,126}[!-~])?$/D', $key) === 1;
    }

    /** newRequestId returns a random UUID (version 4) to use as a request id. */
    public static function newRequestId(): string
    {
        $b = random_bytes(16);
        $b[6] = chr((ord($b[6]) & 0x0f) | 0x40);
        $b[8] = chr((ord($b[8]) & 0x3f) | 0x80);
        return vsprintf('%s%s-%s-%s-%s-%s%s%s', str_split(bin2hex($b), 4));
    }

    /** @return array<string,mixed> */
    public function __debugInfo(): array
    {
        return ['base' => $this->base, 'token' => '(hidden)', 'options' => $this->options];
    }

    /**
     * A Client is not serialized (nor was one with Guzzle, whose handlers
     * are closures): build one where it is needed, with Client::create or
     * the container.
     *
     * @return array<string,mixed>
     */
    public function __serialize(): array
    {
        throw new \LogicException('invledger client: a Client cannot be serialized; build one where it is needed (Client::create)');
    }

    /** @param array<string,mixed> $data */
    public function __unserialize(array $data): void
    {
        throw new \LogicException('invledger client: a Client cannot be unserialized; build one with Client::create');
    }

    /**
     * send makes the call, retrying 503s and transport errors until the
     * deadline, and returns the decoded 2xx body and its answer.
     *
     * @param array<string,mixed>|null $body
     * @return array{0: array<string,mixed>, 1: ResponseInterface}
     */
    private function send(string $method, string $path, ?array $body, ?string $key, ?string $requestId, bool $retry = true): array
    {
        try {
            $payload = $body === null ? null : json_encode($body, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE);
        } catch (\JsonException $e) {
            // Only a string that is not UTF-8 fails here; nothing was sent.
            throw new \InvalidArgumentException($this->redact(sprintf('invledger client: %s %s: %s is not valid UTF-8', $method, $path, self::notUtf8((array) $body))), 0, $e);
        }
        $start = hrtime(true);
        $wait = $this->options->retryWait;
        for ($attempt = 1; ; $attempt++) {
            try {
                return $this->once($method, $path, $payload, $key, $requestId);
            } catch (UnavailableException $e) {
                $elapsed = (hrtime(true) - $start) / 1e9;
                // A 503's Retry-After is the server's word; a transport
                // error has none, and backs off from retryWait.
                $pause = min($e instanceof ConnectionException ? $wait : max($wait, (float) $e->retryAfter), $this->options->maxRetryWait);
                if (!$retry || $elapsed + $pause >= $this->options->deadline) {
                    throw $e;
                }
                $this->options->logger?->warning('invledger: retrying', [
                    'method' => $method, 'path' => $this->redact($path), 'attempt' => $attempt, 'request_id' => $requestId,
                    'error' => $e->errorCode, 'trace_id' => $e->traceId, 'wait_seconds' => $pause,
                ]);
                $this->sleep($pause);
                $wait *= 2;
            }
        }
    }

    /**
     * once makes one try; a 503 or no answer is an UnavailableException.
     *
     * @return array{0: array<string,mixed>, 1: ResponseInterface}
     */
    private function once(string $method, string $path, ?string $payload, ?string $key, ?string $requestId): array
    {
        try {
            $req = $this->requests->createRequest($method, $this->base . $path)
                ->withHeader('Authorization', $this->reveal('header'))
                ->withHeader('Accept', 'application/json');
            if ($payload !== null) {
                $req = $req->withHeader('Content-Type', 'application/json')->withBody($this->streams->createStream($payload));
            }
            if ($key !== null && self::headerKey($key)) {
                // A request_id the header cannot carry goes in the body alone.
                $req = $req->withHeader('Idempotency-Key', $key);
            }
        } catch (\Throwable $e) {
            // A factory's refusal may quote a header, and its trace carries
            // the header's value: only its redacted message goes on.
            throw new \InvalidArgumentException($this->redact(sprintf('invledger client: %s %s: the request could not be built: %s',
                $method, $path, $e->getMessage())));
        }
        try {
            $res = $this->http->sendRequest($req);
            $raw = (string) $res->getBody();
        } catch (ClientExceptionInterface|\RuntimeException $e) {
            // The previous exception is left out, as its request (and the
            // trace's arguments) carry the token; the message is redacted,
            // in case a transport quotes the request's headers.
            throw new ConnectionException('connection', $this->redact(sprintf('%s %s: no answer: %s', $method, $path, $e->getMessage())),
                null, null, 0, $requestId, 1);
        } catch (\Throwable $e) {
            // A fault of the HTTP client itself (not a transport error, so
            // not retried), without its trace, whose arguments carry the
            // request.
            throw new \LogicException($this->redact(sprintf('invledger client: %s %s: the HTTP client failed: %s: %s (%s:%d)',
                $method, $path, get_class($e), $e->getMessage(), $e->getFile(), $e->getLine())));
        }
        $status = $res->getStatusCode();
        $decoded = json_decode($raw, true);
        if ($status < 200 || $status > 299) {
            // An answer may echo the request's headers: what of it goes
            // into the exception is redacted.
            $after = preg_match('/^[0-9]+$/', $res->getHeaderLine('Retry-After')) === 1 ? (int) $res->getHeaderLine('Retry-After') : null;
            $traceId = self::traceId($res);
            throw InvledgerException::fromAnswer($status, is_array($decoded) ? $this->redactAll($decoded) : null, $this->redact($raw),
                $traceId === null ? null : $this->redact($traceId), $after, $requestId);
        }
        if (!is_array($decoded)) {
            $traceId = self::traceId($res);
            throw new UnexpectedResponseException('bad_answer', $this->redact(sprintf('%s %s: the answer is not a JSON object', $method, $path)),
                null, $traceId === null ? null : $this->redact($traceId), $status, $requestId);
        }
        return [$decoded, $res];
    }

    /**
     * secretCell returns the cell that keeps $token: the frame of a
     * suspended generator, whose variables PHP shows to no dump,
     * var_export, cast, serialization (a Generator refuses it) or
     * reflection, and whose argument is a SensitiveParameter in any trace.
     * Sent [op, text], it yields the answer, then waits for the next
     * question (reveal does both): op "header" answers the Authorization
     * header's value, "redact" answers text with the token (as it is,
     * JSON-escaped or URL-encoded) and any "Bearer <credential>" replaced
     * by "(hidden)"; a text the expressions fail on is "(hidden)" whole.
     *
     * @return \Generator<int, string|null, array{0: string, 1: string}, void>
     */
    private static function secretCell(#[\SensitiveParameter] string $token): \Generator
    {
        // The token as it is, or with any of its bytes escaped (JSON's
        // "\/" or "\u002f", escaped again when JSON is quoted in JSON) or
        // URL-encoded; letters in any case.
        $forms = '';
        foreach (str_split($token) as $byte) {
            $hex = bin2hex($byte);
            $forms .= sprintf('(?:\\\\*%s|\\\\*u00%s|%%%s)', preg_quote($byte, '~'), $hex, $hex);
        }
        $forms = '~' . $forms . '~i';
        while (true) {
            [$op, $text] = yield null;
            if ($op === 'header') {
                yield 'Bearer ' . $token;
                continue;
            }
            $text = preg_replace($forms, '(hidden)', (string) $text);
            // An echoed Authorization header, of this token or another (in
            // JSON too, where "/" may be "\/"); a placeholder such as
            // "Bearer <secret>" is left as it is.
            yield $text === null ? '(hidden)' : (preg_replace('~\b(bearer)[ \t]+(?!<)(?:\\\\+/|[^\s"\',;\\\\])+~i', '$1 (hidden)', $text) ?? '(hidden)');
            $text = '';
        }
    }

    /** reveal asks the token's cell $op about $text; see secretCell. */
    private function reveal(string $op, string $text = ''): string
    {
        $answer = (string) $this->secret->send([$op, $text]);
        $this->secret->next(); // back to waiting: the cell's current value is null again
        return $answer;
    }

    /** redact returns $text with the token and any "Bearer <credential>" hidden. */
    private function redact(string $text): string
    {
        return $this->reveal('redact', $text);
    }

    /**
     * redactAll redacts every string, key or value, of a decoded answer.
     *
     * @param array<mixed> $a
     * @return array<mixed>
     */
    private function redactAll(array $a): array
    {
        $out = [];
        foreach ($a as $k => $v) {
            $out[is_string($k) ? $this->redact($k) : $k] = is_string($v) ? $this->redact($v) : (is_array($v) ? $this->redactAll($v) : $v);
        }
        return $out;
    }

    /**
     * notUtf8 names the member of $body that is not valid UTF-8, as the
     * API would name it (user_id, lines[1].sku).
     *
     * @param array<mixed> $body
     */
    private static function notUtf8(array $body, string $prefix = ''): string
    {
        foreach ($body as $k => $v) {
            $name = is_int($k) ? sprintf('%s[%d]', $prefix, $k) : ($prefix === '' ? $k : $prefix . '.' . $k);
            if (is_string($v) && preg_match('//u', $v) !== 1) {
                return $name;
            }
            if (is_array($v) && ($inner = self::notUtf8($v, $name)) !== '') {
                return $inner;
            }
        }
        return '';
    }

    private function sleep(float $seconds): void
    {
        if ($this->options->sleep !== null) {
            ($this->options->sleep)($seconds);
            return;
        }
        usleep((int) ($seconds * 1e6));
    }

    private static function traceId(ResponseInterface $res): ?string
    {
        $id = $res->getHeaderLine('X-Request-Id');
        return $id === '' ? null : $id;
    }

    private static function skuPath(string $sku): string
    {
        return '/v1/skus/' . rawurlencode($sku);
    }

    private static function holdPath(string $sku, string $holdId): string
    {
        return self::skuPath($sku) . '/holds/' . rawurlencode($holdId);
    }

    private static function orderPath(string $orderId): string
    {
        return '/v1/orders/' . rawurlencode($orderId);
    }
}
