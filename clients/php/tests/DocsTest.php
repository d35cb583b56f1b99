<?php

declare(strict_types=1);

namespace Invledger\Tests;

use PHPUnit\Framework\TestCase;

/**
 * DocsTest runs the PHP examples of docs/php.md as written, against the
 * private stack: each ```php block, unless the line before its fence says
 * "<!-- not run: why -->", in a process of its own, with the address
 * http://127.0.0.1:8080 of the examples replaced by the stack's.
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
        preg_match_all('/(?:^(<!-- not run:[^\n]*-->)\n)?^```php\n(.*?)^```$/ms', $page, $blocks, PREG_SET_ORDER);
        $run = array_values(array_filter($blocks, static fn (array $b) => $b[1] === ''));
        self::assertCount(count(self::OUTPUTS), $run, 'the examples of docs/php.md that run; update OUTPUTS when one is added');
        self::assertStringContainsString("\$inv = \\Invledger\\Client::create('http://127.0.0.1:8080', getenv('INVLEDGER_TOKEN'));", $run[0][2],
            'the first example is the first lines a PHP developer writes');

        Stack::define('sku-1', 100, 2);
        Stack::define('sku-2', 100, 2);
        putenv('INVLEDGER_TOKEN=' . Stack::gatewayToken());
        try {
            foreach ($run as $i => $block) {
                $code = str_replace('http://127.0.0.1:8080', Stack::url(), $block[2], $replaced);
                self::assertGreaterThan(0, $replaced, "example $i names no address");
                $file = tempnam(sys_get_temp_dir(), 'invledger-doc') . '.php';
                file_put_contents($file, "<?php\nrequire " . var_export(__DIR__ . '/bootstrap.php', true) . ";\n" . $code);
                $out = Stack::php($file, [[]])[0];
                unlink($file);
                $want = self::OUTPUTS[$i];
                if (str_starts_with($want, '/')) {
                    self::assertMatchesRegularExpression($want, $out, "example $i");
                } else {
                    self::assertSame($want, $out, "example $i");
                }
            }
        } finally {
            putenv('INVLEDGER_TOKEN');
        }
        $first = Stack::gateway()->deduct('sku-1', 'user-42', 1, 'req-1');
        self::assertTrue($first->replayed, 'the first example bought a unit with req-1');
    }
}
