// Package domain holds invledger's rules, free of any infrastructure: it
// imports nothing from Redis, SQL or Watermill.
//
// What lives here:
//   - validated identifiers (SKUID, UserID, RequestID, Quantity, Reason),
//     each built only by a constructor that returns a *FieldError naming the
//     offending input field;
//   - SKUDefinition, a SKU's initial stock and per-user limit;
//   - Event, one change to a SKU's stock (stocked, deducted, released,
//     adjusted), and SKUState with Apply and Fold, which replay a SKU's
//     events and refuse any event that would break an invariant (a seq out
//     of order, stock below zero, a buyer over the limit);
//   - the tamper-evident chain that links each event to the previous one;
//   - manual adjustments and the rule that the requester cannot approve;
//   - the sentinel errors of every refusal (ErrSoldOut, ErrAlreadyPurchased,
//     ErrNotWarmed, ...), declared beside the rules that raise them.
//
// The ledger package runs these rules against Redis and PostgreSQL through
// ports; adapters translate the sentinels to HTTP statuses, CLI exit
// statuses and metric labels.
package domain
