package hub

import (
	"fmt"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress shows one file's download: a bar on a terminal, else a plain
// line every ProgressEvery (bytes, percentage, rate, ETA). A nil *progress
// shows nothing.
type progress struct {
	c     *Client
	label string
	size  int64 // -1 when unknown
	bar   *progressbar.ProgressBar

	mu        sync.Mutex
	done      int64 // bytes present, including a resumed prefix
	startDone int64
	start     time.Time
	lastLine  time.Time
}

func (c *Client) newProgress(label string, size, done int64) *progress {
	if c.Progress == nil {
		return nil
	}
	p := &progress{c: c, label: label, size: size, done: done, startDone: done, start: time.Now()}
	p.lastLine = p.start
	if c.Terminal {
		p.bar = progressbar.NewOptions64(size,
			progressbar.OptionSetWriter(c.Progress),
			progressbar.OptionSetDescription(label),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowTotalBytes(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetWidth(20),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(c.Progress) }),
			progressbar.OptionSetRenderBlankState(true),
		)
		if done > 0 {
			_ = p.bar.Set64(done)
		}
		return p
	}
	what := "downloading"
	if done > 0 {
		what = "resuming at " + humanBytes(done)
	}
	fmt.Fprintf(c.Progress, "%s: %s (%s)\n", label, what, sizeText(size))
	return p
}

func (p *progress) add(n int64) {
	if p == nil || n == 0 {
		return
	}
	if p.bar != nil {
		_ = p.bar.Add64(n)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	every := p.c.ProgressEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	if now := time.Now(); now.Sub(p.lastLine) >= every {
		p.lastLine = now
		fmt.Fprintln(p.c.Progress, p.line(now))
	}
}

// line is "label: 12.0 MiB of 100.0 MiB (12%), 4.2 MiB/s, ETA 21s".
func (p *progress) line(now time.Time) string {
	el := now.Sub(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(p.done-p.startDone) / el
	}
	s := fmt.Sprintf("%s: %s", p.label, humanBytes(p.done))
	if p.size > 0 {
		s += fmt.Sprintf(" of %s (%d%%)", humanBytes(p.size), p.done*100/p.size)
	}
	s += fmt.Sprintf(", %s/s", humanBytes(int64(rate)))
	if p.size > 0 && rate > 0 {
		eta := time.Duration(float64(p.size-p.done) / rate * float64(time.Second))
		s += ", ETA " + eta.Round(time.Second).String()
	}
	return s
}

func (p *progress) finish() {
	if p == nil {
		return
	}
	if p.bar != nil {
		_ = p.bar.Finish()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	el := time.Since(p.start)
	rate := 0.0
	if s := el.Seconds(); s > 0 {
		rate = float64(p.done-p.startDone) / s
	}
	fmt.Fprintf(p.c.Progress, "%s: %s in %s (%s/s)\n", p.label, humanBytes(p.done), el.Round(time.Millisecond), humanBytes(int64(rate)))
}

func sizeText(n int64) string {
	if n < 0 {
		return "size unknown"
	}
	return humanBytes(n)
}

// humanBytes is n in binary units: "512 B", "1.5 KiB", "3.2 GiB".
func humanBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= 1024
		if f < 1024 || u == "TiB" {
			return fmt.Sprintf("%.1f %s", f, u)
		}
	}
	return ""
}

// abort ends a terminal bar's line after a failed transfer (a resumed
// transfer goes on with the same progress).
func (p *progress) abort() {
	if p != nil && p.bar != nil {
		fmt.Fprintln(p.c.Progress)
	}
}

// printf writes a status line to Progress, if any.
func (c *Client) printf(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, format, args...)
	}
}
