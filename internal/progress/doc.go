// Package progress draws the one live status line that `invledger demo` and
// `invledger-lab bench` redraw while they run.
package progress
