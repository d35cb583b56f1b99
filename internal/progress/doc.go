// Package progress draws the one live status line that `invledger demo` and
// `invledger bench` redraw while they run.
package progress
