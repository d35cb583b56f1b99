<?php

declare(strict_types=1);

namespace Invledger\Exception;

/**
 * InvledgerException is an error answer of the invledger API, or a call that
 * could not get one. Every error code of the API has its own subclass
 * (SoldOutException for sold_out, ...), so a caller catches the business
 * meaning it handles and lets the rest go up.
 *
 * Its message is "field: detail (HTTP status code, trace trace_id)"; it never
 * contains the token.
 */
abstract class InvledgerException extends \RuntimeException
{
    /** The error classes by the API's stable error code. */
    public const BY_CODE = [
        'invalid_request' => InvalidRequestException::class,
        'unauthorized' => UnauthorizedException::class,
        'forbidden' => ForbiddenException::class,
        'not_found' => NotFoundException::class,
        'method_not_allowed' => MethodNotAllowedException::class,
        'request_timeout' => RequestTimeoutException::class,
        'self_approval' => SelfApprovalException::class,
        'insufficient_stock' => InsufficientStockException::class,
        'sold_out' => SoldOutException::class,
        'already_purchased' => AlreadyPurchasedException::class,
        'not_warmed' => NotWarmedException::class,
        'closed' => ClosedException::class,
        'retired' => RetiredException::class,
        'needs_restore' => NeedsRestoreException::class,
        'conflict' => ConflictException::class,
        'hold_expired' => HoldExpiredException::class,
        'hold_confirmed' => HoldConfirmedException::class,
        'hold_cancelled' => HoldCancelledException::class,
        'hold_released' => HoldReleasedException::class,
        'recovering' => RecoveringException::class,
        'unavailable' => UnavailableException::class,
        'unsafe_redis' => UnsafeRedisException::class,
        'corrupt_ledger' => CorruptLedgerException::class,
        'not_ready' => NotReadyException::class,
        'internal' => InternalException::class,
    ];

    /**
     * @param string      $errorCode the API's stable code, e.g. sold_out
     * @param string      $detail    the API's explanation, for people
     * @param string|null $field     the input at fault, e.g. qty or lines[1]
     * @param string|null $traceId   the request's X-Request-Id, as in the server's log lines
     * @param int         $status    the HTTP status; 0 when no answer came
     * @param string|null $requestId the purchase's or order's idempotency key, to retry with
     */
    public function __construct(
        public readonly string $errorCode,
        public readonly string $detail,
        public readonly ?string $field = null,
        public readonly ?string $traceId = null,
        public readonly int $status = 0,
        public readonly ?string $requestId = null,
        ?\Throwable $previous = null,
    ) {
        $msg = ($field !== null && $field !== '' ? $field . ': ' : '') . $detail;
        $msg .= $status > 0 ? sprintf(' (HTTP %d %s', $status, $errorCode) : sprintf(' (%s', $errorCode);
        if ($traceId !== null && $traceId !== '') {
            $msg .= ', trace ' . $traceId;
        }
        $msg .= ')';
        if ($requestId !== null && $this instanceof UnavailableException) {
            $msg .= sprintf('; retry with request id %s', $requestId);
        }
        parent::__construct($msg, 0, $previous);
    }

    /**
     * fromAnswer builds the exception of an error answer: the class of its
     * code, or UnexpectedResponseException for a code this client does not
     * know or an answer that is not the API's error body.
     *
     * @param array<string,mixed>|null $body the decoded JSON body, if any
     */
    public static function fromAnswer(int $status, ?array $body, string $raw, ?string $traceId, ?int $retryAfter, ?string $requestId): self
    {
        $code = is_array($body) && is_string($body['error'] ?? null) ? $body['error'] : '';
        $detail = is_array($body) && is_string($body['detail'] ?? null) ? $body['detail'] : trim(substr($raw, 0, 512));
        $field = is_array($body) && is_string($body['field'] ?? null) ? $body['field'] : null;
        if (is_array($body) && is_string($body['trace_id'] ?? null)) {
            $traceId = $body['trace_id'];
        }
        $class = self::BY_CODE[$code] ?? null;
        if ($class === null) {
            return new UnexpectedResponseException($code !== '' ? $code : 'http_error', $detail, $field, $traceId, $status, $requestId);
        }
        if (is_a($class, UnavailableException::class, true)) {
            return new $class($code, $detail, $field, $traceId, $status, $requestId, $retryAfter ?? 1);
        }
        return new $class($code, $detail, $field, $traceId, $status, $requestId);
    }
}
