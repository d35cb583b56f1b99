// Package eventtail follows the events of one SKU as the purchase scripts
// append them to its partition stream: a live view for operators (`invledger
// tail`), and later a browser console's feed.
//
// It reads with watermill-redisstream's Subscriber in fan-out mode: plain
// XREAD, no consumer group, so a tail leaves nothing pending, needs no
// cleanup, and any number of tails can follow one stream without taking
// entries from the projector. Its per-message model (one XREAD COUNT 1 per
// entry) costs one Redis round trip per event of the partition, which a
// human-paced view can afford; the projector, which must keep up with a
// sale, reads in batches with projections/internal/redisbatch instead.
package eventtail
