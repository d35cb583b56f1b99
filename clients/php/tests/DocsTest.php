<?php

declare(strict_types=1);

namespace Invledger\Tests;

use PHPUnit\Framework\TestCase;

/**
 * DocsTest runs docs/php.md as a reader of a fresh dev stack does: its
 * commands (the ```sh block marked "readme-test: run", which define and
 * warm its SKUs) with the invledger CLI, then each ```php block, unless the
 * line before its fence says "<!-- not run: why -->", as written, in a
 * process of its own. Both see only the variables `source .invledger/env`
 * exports that they read: the stores' URLs for the CLI, INVLEDGER_URL and
 * INVLEDGER_TOKEN (the gateway's secret) for the examples.
 */
final class DocsTest extends TestCase
{
    /** What each example run prints, in the order of the page. */
    private const OUTPUTS = [
        '',
        "ok\n",
        "bool(true)\n",
        '/^[0-9a-f-]{36} is held until \S+\nheld: 2 lines\n$/',
    ];

    public function testTheExamplesRunAsWritten(): void
    {
        $page = (string) file_get_contents((string) getenv('INVLEDGER_TEST_DOCS'));
        $env = self::readerEnv();

        preg_match_all('/^<!-- readme-test: run -->\n```sh\n(.*?)^```$/ms', $page, $commands);
        self::assertCount(1, $commands[1], 'docs/php.md sets up its examples with one block of commands');
        self::runProcess(['bash', '-e', '-c', $commands[1][0]], $env);

        preg_match_all('/(?:^(<!-- not run:[^\n]*-->)\n)?^```php\n(.*?)^```$/ms', $page, $blocks, PREG_SET_ORDER);
        $run = array_values(array_filter($blocks, static fn (array $b) => $b[1] === ''));
        self::assertCount(count(self::OUTPUTS), $run, 'the examples of docs/php.md that run; update OUTPUTS when one is added');
        self::assertStringContainsString("\$inv = \\Invledger\\Client::create(getenv('INVLEDGER_URL'), getenv('INVLEDGER_TOKEN'));", $run[0][2],
            'the first example is the first lines a PHP developer writes');
        foreach ($run as $i => $block) {
            $file = tempnam(sys_get_temp_dir(), 'invledger-doc') . '.php';
            file_put_contents($file, "<?php\n" . self::autoload() . $block[2]);
            try {
                $out = self::runProcess([PHP_BINARY, $file], $env);
            } finally {
                unlink($file);
            }
            $want = self::OUTPUTS[$i];
            if (str_starts_with($want, '/')) {
                self::assertMatchesRegularExpression($want, $out, "example $i");
            } else {
                self::assertSame($want, $out, "example $i");
            }
        }
        $first = Stack::gateway()->deduct('sku-1', 'user-42', 1, 'req-1');
        self::assertTrue($first->replayed, 'the first example bought a unit with req-1');
    }

    /**
     * readerEnv is this process's environment without any INVLEDGER_
     * variable, plus those of the dev env file that the page's commands and
     * examples read, and the invledger command on PATH.
     *
     * @return array<string,string>
     */
    private static function readerEnv(): array
    {
        $env = array_filter(getenv(), static fn (string $name) => !str_starts_with($name, 'INVLEDGER_'), ARRAY_FILTER_USE_KEY);
        $env['PATH'] = self::need('INVLEDGER_TEST_CLI_DIR') . PATH_SEPARATOR . ($env['PATH'] ?? '/usr/bin:/bin');
        $env['INVLEDGER_REDIS_URL'] = self::need('INVLEDGER_TEST_REDIS_URL');
        $env['INVLEDGER_DATABASE_URL'] = self::need('INVLEDGER_TEST_DATABASE_URL');
        $env['INVLEDGER_URL'] = Stack::url();
        $env['INVLEDGER_TOKEN'] = Stack::gatewayToken();
        return $env;
    }

    /** autoload is the lines that stand for the reader's Composer autoloader: this package, Guzzle and the PSR factories. */
    private static function autoload(): string
    {
        return 'require ' . var_export(self::need('INVLEDGER_PHP_AUTOLOAD'), true) . ";\n"
            . "require_once 'GuzzleHttp/autoload.php';\nrequire_once 'Psr/Http/Message/factory-autoload.php';\n";
    }

    /**
     * runProcess runs $cmd with $env and returns its standard output; it fails the
     * test, with the standard error, unless $cmd exits 0.
     *
     * @param list<string> $cmd
     * @param array<string,string> $env
     */
    private static function runProcess(array $cmd, array $env): string
    {
        $p = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null, $env);
        self::assertNotFalse($p, 'cannot start ' . $cmd[0]);
        $out = (string) stream_get_contents($pipes[1]);
        $err = (string) stream_get_contents($pipes[2]);
        fclose($pipes[1]);
        fclose($pipes[2]);
        self::assertSame(0, proc_close($p), implode(' ', $cmd) . " failed:\n$err$out");
        return $out;
    }

    private static function need(string $name): string
    {
        $v = getenv($name);
        self::assertIsString($v, "$name is not set: the suite runs from clients/php/php_test.go");
        return $v;
    }
}
