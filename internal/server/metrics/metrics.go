// Package metrics keeps counters, gauges and histograms with labels and
// writes them in Prometheus' text exposition format (version 0.0.4).
// prometheus/client_golang is not used: importing it costs the binary
// over 1 ms of package initialisation (it registers the Go and process
// collectors at init), which every command would pay.
package metrics

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ContentType is the exposition format's.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Registry holds metric families, written in the order they were made.
type Registry struct {
	mu       sync.Mutex
	families []*family
}

type kind string

const (
	counter   kind = "counter"
	gauge     kind = "gauge"
	histogram kind = "histogram"
)

type family struct {
	name, help string
	kind       kind
	labels     []string
	buckets    []float64 // histograms'

	mu     sync.Mutex
	series map[string]*series // by joined label values
	// collect, when set, gives the samples at each scrape instead.
	collect func(add func(value float64, labels ...string))
}

type series struct {
	labels []string
	value  float64
	counts []uint64 // per bucket, histograms'
	sum    float64
	count  uint64
}

func (r *Registry) add(f *family) *family {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.families {
		if g.name == f.name {
			panic("metrics: " + f.name + " made twice")
		}
	}
	f.series = map[string]*series{}
	r.families = append(r.families, f)
	return f
}

// Counter is a family of counters, one per set of label values.
type Counter struct{ f *family }

// Counter makes a counter family.
func (r *Registry) Counter(name, help string, labels ...string) Counter {
	c := Counter{r.add(&family{name: name, help: help, kind: counter, labels: labels})}
	if len(labels) == 0 {
		// Scraped at 0 from the start: an alert on its rate sees data.
		c.Add(0)
	}
	return c
}

// Add adds n to the counter of the label values.
func (c Counter) Add(n float64, values ...string) { c.f.get(values).value += n; c.f.mu.Unlock() }

// Inc adds one.
func (c Counter) Inc(values ...string) { c.Add(1, values...) }

// Gauge is a family of values that go up and down.
type Gauge struct{ f *family }

// Gauge makes a gauge family.
func (r *Registry) Gauge(name, help string, labels ...string) Gauge {
	g := Gauge{r.add(&family{name: name, help: help, kind: gauge, labels: labels})}
	if len(labels) == 0 {
		g.Add(0)
	}
	return g
}

// Add adds n (which may be negative) to the gauge of the label values.
func (g Gauge) Add(n float64, values ...string) { g.f.get(values).value += n; g.f.mu.Unlock() }

// Collected makes a family whose samples collect gives at each scrape
// (a count read from a database, a map's size), with kind "gauge" or
// "counter".
func (r *Registry) Collected(name, help, kind_ string, collect func(add func(value float64, labels ...string)), labels ...string) {
	r.add(&family{name: name, help: help, kind: kind(kind_), labels: labels, collect: collect})
}

// Histogram is a family of distributions of durations, in seconds.
type Histogram struct{ f *family }

// DefaultBuckets suit durations from a millisecond to ten seconds.
var DefaultBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Histogram makes a histogram family with the upper bounds buckets.
func (r *Registry) Histogram(name, help string, buckets []float64, labels ...string) Histogram {
	return Histogram{r.add(&family{name: name, help: help, kind: histogram, labels: labels, buckets: buckets})}
}

// Observe counts a duration.
func (h Histogram) Observe(d time.Duration, values ...string) {
	v := d.Seconds()
	s := h.f.get(values)
	defer h.f.mu.Unlock()
	if s.counts == nil {
		s.counts = make([]uint64, len(h.f.buckets))
	}
	for i, b := range h.f.buckets {
		if v <= b {
			s.counts[i]++
		}
	}
	s.sum += v
	s.count++
}

// get returns the series of values, with f.mu held.
func (f *family) get(values []string) *series {
	if len(values) != len(f.labels) {
		panic(fmt.Sprintf("metrics: %s takes labels %v, got %d values", f.name, f.labels, len(values)))
	}
	key := strings.Join(values, "\xff")
	f.mu.Lock()
	s := f.series[key]
	if s == nil {
		s = &series{labels: slices.Clone(values)}
		f.series[key] = s
	}
	return s
}

// Write writes every family in the text format.
func (r *Registry) Write(w io.Writer) error {
	r.mu.Lock()
	families := slices.Clone(r.families)
	r.mu.Unlock()
	var b strings.Builder
	for _, f := range families {
		f.write(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (f *family) write(b *strings.Builder) {
	var ss []*series
	if f.collect != nil {
		f.collect(func(v float64, labels ...string) {
			ss = append(ss, &series{labels: labels, value: v})
		})
	} else {
		f.mu.Lock()
		for _, s := range f.series {
			c := *s
			c.counts = slices.Clone(s.counts)
			ss = append(ss, &c)
		}
		f.mu.Unlock()
	}
	slices.SortFunc(ss, func(a, b *series) int { return slices.Compare(a.labels, b.labels) })
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", f.name, escape(f.help, false), f.name, f.kind)
	for _, s := range ss {
		if f.kind != histogram {
			fmt.Fprintf(b, "%s%s %s\n", f.name, f.pairs(s.labels, ""), number(s.value))
			continue
		}
		for i, le := range f.buckets {
			var n uint64
			if s.counts != nil {
				n = s.counts[i]
			}
			fmt.Fprintf(b, "%s_bucket%s %d\n", f.name, f.pairs(s.labels, number(le)), n)
		}
		fmt.Fprintf(b, "%s_bucket%s %d\n", f.name, f.pairs(s.labels, "+Inf"), s.count)
		fmt.Fprintf(b, "%s_sum%s %s\n%s_count%s %d\n", f.name, f.pairs(s.labels, ""), number(s.sum), f.name, f.pairs(s.labels, ""), s.count)
	}
}

// pairs are the {name="value",…} of a sample; le, when set, is a
// histogram bucket's bound.
func (f *family) pairs(values []string, le string) string {
	var parts []string
	for i, v := range values {
		parts = append(parts, f.labels[i]+`="`+escape(v, true)+`"`)
	}
	if le != "" {
		parts = append(parts, `le="`+le+`"`)
	}
	if len(parts) == 0 {
		return ""
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func escape(s string, quote bool) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, "\n", `\n`)
	if quote {
		s = strings.ReplaceAll(s, `"`, `\"`)
	}
	return s
}

func number(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
