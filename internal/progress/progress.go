package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Line redraws one status line from render every interval until the
// returned func is called, which draws it a last time. Without a terminal
// it prints a line per second instead, so CI logs stay readable.
func Line(w io.Writer, interval time.Duration, render func() string) (stop func()) {
	interactive := isTerminal(w)
	if !interactive {
		interval = time.Second
	}
	draw := func(final bool) {
		switch {
		case !interactive:
			fmt.Fprintln(w, render())
		case final:
			fmt.Fprintf(w, "\r%s\x1b[K\n", render())
		default:
			fmt.Fprintf(w, "\r%s\x1b[K", render())
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				draw(true)
				return
			case <-tick.C:
				draw(false)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// Bar renders frac (0..1) as width characters of '#' and ' '.
func Bar(frac float64, width int) string {
	filled := min(width, max(0, int(frac*float64(width))))
	return strings.Repeat("#", filled) + strings.Repeat(" ", width-filled)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Printer writes a progress line at most once a second, and always the last
// one, so long runs show they are alive without flooding a log.
type Printer struct {
	w     io.Writer
	start time.Time
	last  time.Time
}

// NewPrinter returns a Printer writing to w, its clock started now.
func NewPrinter(w io.Writer) *Printer {
	now := time.Now()
	return &Printer{w: w, start: now, last: now}
}

// Print writes the line unless one was written less than a second ago;
// the final line is always written.
func (p *Printer) Print(final bool, format string, args ...any) {
	if now := time.Now(); final || now.Sub(p.last) >= time.Second {
		p.last = now
		fmt.Fprintf(p.w, format+"\n", args...)
	}
}

// Rate is n per second since the Printer was made.
func (p *Printer) Rate(n int64) float64 {
	return float64(n) / max(time.Since(p.start).Seconds(), 1e-9)
}
