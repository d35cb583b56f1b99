<?php

declare(strict_types=1);

namespace App\Http\Middleware;

use Illuminate\Auth\GenericUser;
use Illuminate\Http\Request;

/**
 * DemoUser stands in for the shop's login, which this example leaves out:
 * the buyer is the X-User header, so $request->user()->id reads as it does
 * behind Laravel's authentication. A request without it is refused.
 */
final class DemoUser
{
    public function handle(Request $request, \Closure $next)
    {
        $id = (string) $request->header('X-User', '');
        if ($id === '') {
            return response()->json(['status' => 'invalid_request', 'field' => 'X-User', 'detail' => 'the buyer: send X-User'], 400);
        }
        $request->setUserResolver(static fn () => new GenericUser(['id' => $id]));
        return $next($request);
    }
}
