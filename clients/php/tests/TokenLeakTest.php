<?php

declare(strict_types=1);

namespace Invledger\Tests;

use GuzzleHttp\Exception\ConnectException;
use GuzzleHttp\Psr7\HttpFactory;
use GuzzleHttp\Psr7\Response;
use Illuminate\Config\Repository;
use Illuminate\Foundation\Application;
use Invledger\Client;
use Invledger\Exception;
use Invledger\Laravel\InvledgerServiceProvider;
use Invledger\Options;
use PHPUnit\Framework\TestCase;
use Psr\Http\Client\ClientInterface;
use Psr\Http\Message\RequestInterface;
use Psr\Http\Message\ResponseInterface;

/**
 * TokenLeakTest tries every way the client's token could get out of the
 * process's memory into a dump, a log or an exception (issue 41): dumps,
 * var_export, array casts, a closure bound to the client, reflection,
 * serialization, a token that is no header value, an answer that echoes
 * the Authorization header, a transport error that quotes it, a fault of
 * the HTTP client, and the traces of the exceptions met on the way, whose
 * arguments are kept in full here (zend.exception_ignore_args off), as in
 * php.ini-development.
 *
 * It needs no stack: a PHP built-in server (php -S) plays the API over real
 * HTTP, and answers echo what it was sent.
 */
final class TokenLeakTest extends TestCase
{
    /** The token; "/" and "+" so that its JSON-escaped and URL-encoded forms differ from it. */
    private const TOKEN = 'leak-test/secret+0123456789';
    /** Another credential an answer may echo. */
    private const OTHER = 'someone-elses-secret-0000';

    /** @var resource|null the echo server's process */
    private static $server = null;
    private static string $url = '';
    private static string $router = '';

    /** @var array<string,string|false> the ini settings setUp changed, as they were */
    private array $ini = [];

    public static function setUpBeforeClass(): void
    {
        self::$router = (string) tempnam(sys_get_temp_dir(), 'invledger-echo');
        file_put_contents(self::$router, self::ROUTER);
        $sock = stream_socket_server('tcp://127.0.0.1:0');
        $addr = (string) stream_socket_get_name($sock, false);
        fclose($sock);
        $p = proc_open([PHP_BINARY, '-S', $addr, self::$router], [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
        if ($p === false) {
            throw new \RuntimeException('cannot start php -S');
        }
        self::$server = $p;
        self::$url = 'http://' . $addr;
        Stack::waitListening($addr);
    }

    public static function tearDownAfterClass(): void
    {
        if (self::$server !== null) {
            proc_terminate(self::$server);
            proc_close(self::$server);
            self::$server = null;
        }
        @unlink(self::$router);
    }

    protected function setUp(): void
    {
        // Traces keep their arguments, strings in full.
        foreach (['zend.exception_ignore_args' => '0', 'zend.exception_string_param_max_len' => '1000000'] as $k => $v) {
            $this->ini[$k] = ini_set($k, $v);
        }
    }

    protected function tearDown(): void
    {
        foreach ($this->ini as $k => $v) {
            if ($v !== false) {
                ini_set($k, $v);
            }
        }
    }

    public function testNoDumpNorVarExportOfAClientShowsTheToken(): void
    {
        foreach ($this->usedClients() as $name => $inv) {
            $dumps = [
                'var_export' => var_export($inv, true),
                'print_r' => print_r($inv, true),
                'var_dump' => self::output(static fn () => var_dump($inv)),
                'debug_zval_dump' => self::output(static fn () => debug_zval_dump($inv)),
                'json_encode' => (string) json_encode($inv, JSON_PARTIAL_OUTPUT_ON_ERROR),
            ];
            foreach ($dumps as $how => $dump) {
                self::assertNoToken($dump, "$how of the $name client");
            }
            self::assertStringContainsString('Invledger\Client', $dumps['var_export']);
        }
    }

    public function testAnArrayCastOfAClientShowsNoToken(): void
    {
        foreach ($this->usedClients() as $name => $inv) {
            $strings = [];
            self::castStrings($inv, $strings, new \SplObjectStorage());
            self::assertNotEmpty($strings);
            self::assertNoToken(implode("\n", $strings), "the strings of (array) casts of the $name client and of what it holds");
            self::assertNoToken(print_r(get_mangled_object_vars($inv), true), "get_mangled_object_vars of the $name client");
        }
    }

    public function testNeitherABoundClosureNorReflectionFindsTheTokenInAClient(): void
    {
        foreach ($this->usedClients() as $name => $inv) {
            $vars = (fn (): array => get_object_vars($this))->call($inv);
            self::assertArrayHasKey('base', $vars, 'the closure is bound to the client');
            $strings = [];
            self::reflectedStrings($vars, $strings, new \SplObjectStorage());
            self::reflectedStrings($inv, $strings, new \SplObjectStorage());
            self::assertNoToken(implode("\n", $strings), "the properties (and statics, and closures' variables) reachable from the $name client");
        }
        $clone = clone Client::create(self::$url, self::TOKEN);
        self::assertSame(hash('sha256', 'Bearer ' . self::TOKEN), $clone->call('GET', '/ok')['authorization_sha256'], 'a clone sends the token');
    }

    public function testAClientIsNotSerialized(): void
    {
        $plain = new Client(new StatelessHttp(), new HttpFactory(), new HttpFactory(), self::$url, self::TOKEN);
        self::assertSame(['ok' => true], $plain->call('GET', '/ok'));
        foreach (['a PSR-18 client without closures' => $plain, 'Guzzle' => Client::create(self::$url, self::TOKEN)] as $name => $inv) {
            try {
                $s = serialize($inv);
                self::fail("a client with $name was serialized: " . self::redactForFailure($s));
            } catch (\LogicException $e) {
                self::assertStringContainsString('cannot be serialized', $e->getMessage(), $name);
                self::assertNoToken(self::thrownDump($e), "the refusal to serialize a client with $name");
            }
        }
        $this->expectException(\LogicException::class);
        unserialize('O:16:"Invledger\Client":0:{}');
    }

    public function testATokenThatCannotBeAHeaderValueIsRefusedWithoutShowingIt(): void
    {
        foreach (["\r\nX-Injected: 1", "\n", "\x00", "\x7f"] as $bad) {
            $token = self::TOKEN . $bad;
            try {
                Client::create(self::$url, $token)->call('GET', '/ok');
                self::fail('a token with ' . json_encode($bad) . ' was sent');
            } catch (\Throwable $e) {
                self::assertInstanceOf(\InvalidArgumentException::class, $e, $e->getMessage());
                self::assertStringContainsString('token must not contain control characters', $e->getMessage());
                self::assertNoToken(self::thrownDump($e), 'the refusal of a token with ' . json_encode($bad));
            }
        }
    }

    public function testAnAnswerThatEchoesTheAuthorizationHeaderIsRedactedInTheException(): void
    {
        $logs = new MemoryLogger();
        $inv = Client::create(self::$url, self::TOKEN, new Options(deadline: 0.5, retryWait: 0.05, logger: $logs));
        $cases = [
            'echo-json' => [Exception\InvalidRequestException::class, 'Authorization: Bearer (hidden) is not allowed'],
            'echo-text' => [Exception\UnexpectedResponseException::class, 'Authorization: Bearer (hidden)'],
            'echo-other' => [Exception\ForbiddenException::class, 'Bearer (hidden) is not yours, nor (hidden) bare'],
            'echo-503' => [Exception\UnavailableException::class, 'upstream saw Authorization: Bearer (hidden)'],
            'echo-bad-answer' => [Exception\UnexpectedResponseException::class, 'the answer is not a JSON object'],
            'placeholder' => [Exception\UnauthorizedException::class, 'a valid Authorization: Bearer <secret> header is required'],
        ];
        foreach ($cases as $route => [$class, $says]) {
            foreach (['deduct' => static fn () => $inv->deduct($route, 'ann', 1, 'req-1'),
                'call' => static fn () => $inv->call('POST', '/v1/' . $route, ['user_id' => 'ann'], 'req-1')] as $how => $call) {
                try {
                    $call();
                    self::fail("$route ($how) answered no error");
                } catch (Exception\InvledgerException $e) {
                    self::assertInstanceOf($class, $e, $e->getMessage());
                    self::assertStringContainsString($says, $e->getMessage(), "$route ($how)");
                    self::assertNoToken(self::thrownDump($e), "the exception of $route ($how)");
                    self::assertStringNotContainsString(self::OTHER, self::thrownDump($e), "the exception of $route ($how)");
                }
            }
        }
        self::assertNotEmpty($logs->lines, 'the 503 was retried');
        self::assertNoToken(implode("\n", $logs->lines), 'the retries\' log lines');
        self::assertSame(hash('sha256', 'Bearer ' . self::TOKEN), $inv->call('GET', '/ok')['authorization_sha256'], 'the token is sent');
    }

    public function testATransportErrorThatQuotesTheRequestIsRedactedAndDropped(): void
    {
        $http = new ThrowingHttp(static fn (RequestInterface $r) => new ConnectException(
            'proxy refused GET ' . $r->getUri() . ' with Authorization: ' . $r->getHeaderLine('Authorization') . ' (' . self::TOKEN . ')', $r));
        $inv = new Client($http, new HttpFactory(), new HttpFactory(), self::$url, self::TOKEN, new Options(deadline: 0.05));
        try {
            $inv->deduct('sku-1', 'ann', 1, 'req-1');
            self::fail('no exception');
        } catch (Exception\ConnectionException $e) {
            self::assertStringContainsString('no answer: proxy refused GET ' . self::$url . '/v1/skus/sku-1/deduct with Authorization: Bearer (hidden) ((hidden))', $e->getMessage());
            self::assertNull($e->getPrevious(), 'the transport\'s exception holds the request');
            self::assertNoToken(self::thrownDump($e), 'the connection error');
        }
    }

    public function testAFaultOfTheHttpClientCarriesNeitherTheTokenNorTheRequest(): void
    {
        $http = new ThrowingHttp(static fn (RequestInterface $r) => new \TypeError('bad request ' . $r->getHeaderLine('Authorization')));
        $inv = new Client($http, new HttpFactory(), new HttpFactory(), self::$url, self::TOKEN, new Options(deadline: 0.05));
        try {
            $inv->getOrder('o-1');
            self::fail('no exception');
        } catch (\Throwable $e) {
            self::assertStringContainsString('bad request Bearer (hidden)', $e->getMessage());
            self::assertNoToken(self::thrownDump($e), 'the fault of the HTTP client');
            self::assertSame(1, $http->calls, 'a fault is not retried');
        }
    }

    public function testTheTracesOfConfigurationMistakesCarryNoToken(): void
    {
        $mistakes = [
            'new Client with a bad URL' => fn () => new Client(new StatelessHttp(), new HttpFactory(), new HttpFactory(), 'ftp://x', self::TOKEN),
            'Client::create with a bad URL' => fn () => Client::create('localhost:8080', self::TOKEN),
            'Client::create with bad options' => fn () => Client::create(self::$url, self::TOKEN, ['deadline' => 0, 'token' => self::TOKEN]),
            'the Laravel provider with INVLEDGER_DEADLINE=0' => fn () => $this->laravel()->make(Client::class),
        ];
        try {
            foreach ($mistakes as $name => $mistake) {
                try {
                    $mistake();
                    self::fail("$name: no exception");
                } catch (\InvalidArgumentException $e) {
                    // Laravel's application, an argument of the frames of
                    // its container and of the provider's closure, holds
                    // every configuration value, the token too: it is
                    // shown by its class name alone.
                    self::assertNoToken(self::thrownDump($e, 'Illuminate\\'), $name);
                }
            }
        } finally {
            foreach (['INVLEDGER_URL', 'INVLEDGER_TOKEN', 'INVLEDGER_DEADLINE'] as $env) {
                putenv($env);
            }
        }
    }

    /**
     * usedClients returns clients that have made calls and met errors: one
     * of Client::create (Guzzle) and one of a PSR-18 client that keeps
     * nothing.
     *
     * @return array<string,Client>
     */
    private function usedClients(): array
    {
        $guzzle = Client::create(self::$url, self::TOKEN, new Options(deadline: 0.5, retryWait: 0.05));
        $plain = new Client(new StatelessHttp(), new HttpFactory(), new HttpFactory(), self::$url, self::TOKEN, new Options(deadline: 0.5));
        self::assertSame(hash('sha256', 'Bearer ' . self::TOKEN), $guzzle->call('GET', '/ok')['authorization_sha256']);
        self::assertSame(['ok' => true], $plain->call('GET', '/ok'));
        try {
            $guzzle->deduct('echo-json', 'ann', 1, 'req-1');
        } catch (Exception\InvledgerException) {
        }
        return ['Guzzle' => $guzzle, 'PSR-18' => $plain];
    }

    /** laravel boots an application with the package's provider, the token and a deadline of 0 in its environment. */
    private function laravel(): Application
    {
        require_once 'Illuminate/autoload.php';
        putenv('INVLEDGER_URL=' . self::$url);
        putenv('INVLEDGER_TOKEN=' . self::TOKEN);
        putenv('INVLEDGER_DEADLINE=0');
        $app = new Application(sys_get_temp_dir());
        $app->instance('config', new Repository([]));
        $app->register(InvledgerServiceProvider::class);
        $app->boot();
        self::assertSame(self::TOKEN, $app->make('config')->get('invledger.token'));
        return $app;
    }

    private static function assertNoToken(string $text, string $where): void
    {
        foreach ([self::TOKEN, rawurlencode(self::TOKEN), substr((string) json_encode(self::TOKEN), 1, -1), 'secret+0123456789'] as $form) {
            if (str_contains($text, $form)) {
                self::fail("$where shows the token:\n" . self::redactForFailure($text));
            }
        }
        self::assertTrue(true);
    }

    /** redactForFailure keeps the failure message of this suite itself free of the token, marking where it was. */
    private static function redactForFailure(string $text): string
    {
        return str_replace('secret+0123456789', '<THE TOKEN WAS HERE>', substr($text, 0, 20000));
    }

    /**
     * thrownDump is everything an exception and its previous ones show:
     * message, string form, trace and public properties, and the arguments
     * of its trace's frames up to PHPUnit's (an argument that is an object
     * of a class under $summarized by its class name alone).
     */
    private static function thrownDump(\Throwable $e, ?string $summarized = null): string
    {
        $out = '';
        for ($t = $e; $t !== null; $t = $t->getPrevious()) {
            $out .= get_class($t) . ': ' . $t->getMessage() . "\n" . $t . "\n" . print_r(get_object_vars($t), true);
            foreach ($t->getTrace() as $frame) {
                $class = $frame['class'] ?? '';
                if (str_starts_with($class, 'PHPUnit\\')) {
                    break;
                }
                $args = array_map(static fn (mixed $a): mixed => $summarized !== null && is_object($a) && str_starts_with(get_class($a), $summarized)
                    ? 'object of ' . get_class($a) : $a, $frame['args'] ?? []);
                $out .= $class . ($frame['type'] ?? '') . $frame['function'] . print_r($args, true);
            }
        }
        return $out;
    }

    /** output returns what $f prints. */
    private static function output(\Closure $f): string
    {
        ob_start();
        try {
            $f();
        } finally {
            $out = (string) ob_get_clean();
        }
        return $out;
    }

    /**
     * castStrings collects every string reachable from $v through arrays and
     * (array) casts of objects, as a dump that casts would show.
     *
     * @param list<string> $out
     * @param \SplObjectStorage<object,null> $seen
     */
    private static function castStrings(mixed $v, array &$out, \SplObjectStorage $seen): void
    {
        if (is_string($v)) {
            $out[] = $v;
        } elseif (is_array($v)) {
            foreach ($v as $k => $x) {
                $out[] = (string) $k;
                self::castStrings($x, $out, $seen);
            }
        } elseif (is_object($v) && !$seen->contains($v)) {
            $seen->attach($v);
            self::castStrings((array) $v, $out, $seen);
        }
    }

    /**
     * reflectedStrings collects every string reachable from $v through
     * reflection: every property of an object and of its parent classes,
     * private and static ones too, and the variables and $this of closures.
     *
     * @param list<string> $out
     * @param \SplObjectStorage<object,null> $seen
     */
    private static function reflectedStrings(mixed $v, array &$out, \SplObjectStorage $seen): void
    {
        if (is_string($v)) {
            $out[] = $v;
            return;
        }
        if (is_array($v)) {
            foreach ($v as $k => $x) {
                $out[] = (string) $k;
                self::reflectedStrings($x, $out, $seen);
            }
            return;
        }
        if (!is_object($v) || $seen->contains($v)) {
            return;
        }
        $seen->attach($v);
        if ($v instanceof \Closure) {
            $f = new \ReflectionFunction($v);
            self::reflectedStrings($f->getStaticVariables(), $out, $seen);
            self::reflectedStrings($f->getClosureThis(), $out, $seen);
        }
        if ($v instanceof \WeakMap || $v instanceof \SplObjectStorage) {
            foreach ($v as $k => $x) {
                self::reflectedStrings($k, $out, $seen);
                self::reflectedStrings($x, $out, $seen);
            }
        }
        for ($c = new \ReflectionObject($v); $c !== false; $c = $c->getParentClass()) {
            foreach ($c->getProperties() as $p) {
                if ($p->getDeclaringClass()->getName() !== $c->getName() && $c->getName() !== get_class($v)) {
                    continue;
                }
                try {
                    $x = $p->isStatic() ? $p->getValue() : ($p->isInitialized($v) ? $p->getValue($v) : null);
                } catch (\Error) {
                    continue;
                }
                $out[] = $p->getName();
                self::reflectedStrings($x, $out, $seen);
            }
        }
    }

    /** The echo server's router: each route answers what a confused proxy or API could, echoing the Authorization header. */
    private const ROUTER = <<<'PHP'
        <?php
        $auth = $_SERVER['HTTP_AUTHORIZATION'] ?? '';
        $path = (string) parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);
        $json = static function (int $status, array $body, array $headers = []): void {
            http_response_code($status);
            header('Content-Type: application/json');
            foreach ($headers as $k => $v) {
                header("$k: $v");
            }
            echo json_encode($body);
        };
        $bare = substr($auth, strlen('Bearer '));
        match (true) {
            str_ends_with($path, '/ok') => $json(200, ['authorization_sha256' => hash('sha256', $auth)]),
            str_contains($path, 'echo-json') => $json(400, ['error' => 'invalid_request',
                'detail' => "the header Authorization: $auth is not allowed; got " . json_encode(['Authorization' => [$auth]]),
                'field' => "Authorization: $auth", 'trace_id' => "trace $auth"], ['X-Request-Id' => $auth]),
            str_contains($path, 'echo-text') => (static function () use ($auth): void {
                http_response_code(400);
                header('Content-Type: text/html');
                header('X-Request-Id: ' . $auth);
                echo "<pre>Bad request\r\nAuthorization: $auth\r\n" . json_encode(['headers' => ['Authorization' => $auth]]) . '</pre>';
            })(),
            str_contains($path, 'echo-other') => $json(403, ['error' => 'forbidden',
                'detail' => 'the token Bearer someone-elses-secret-0000 is not yours, nor ' . $bare . ' bare',
                'trace_id' => rawurlencode($bare)]),
            str_contains($path, 'echo-503') => $json(503, ['error' => 'unavailable', 'detail' => "upstream saw Authorization: $auth",
                'trace_id' => $bare], ['Retry-After' => '0']),
            str_contains($path, 'echo-bad-answer') => (static function () use ($auth): void {
                header('X-Request-Id: ' . $auth);
                echo 'not json ' . $auth;
            })(),
            str_contains($path, 'placeholder') => $json(401, ['error' => 'unauthorized',
                'detail' => 'a valid Authorization: Bearer <secret> header is required', 'trace_id' => 't']),
            default => $json(404, ['error' => 'not_found', 'detail' => 'no route ' . $path, 'trace_id' => 't']),
        };
        PHP;
}

/** StatelessHttp answers every request 200 {"ok":true} and keeps nothing, not even a closure. */
final class StatelessHttp implements ClientInterface
{
    public function sendRequest(RequestInterface $request): ResponseInterface
    {
        return new Response(200, ['Content-Type' => 'application/json'], '{"ok":true}');
    }
}

/** ThrowingHttp throws what $fault makes of each request. */
final class ThrowingHttp implements ClientInterface
{
    public int $calls = 0;

    /** @param \Closure(RequestInterface):\Throwable $fault */
    public function __construct(private \Closure $fault)
    {
    }

    public function sendRequest(RequestInterface $request): ResponseInterface
    {
        $this->calls++;
        throw ($this->fault)($request);
    }
}
