package engine

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"mistralrs/internal/kvcache"
)

// poolBlocks sizes the paged KV pool from o's budget: fraction of physical
// memory over context length over megabytes, as mistral.rs's TOML builder
// resolves them; one must be given (internal/config's table holds the
// default fraction). Block memory is allocated as
// blocks are first used, so a large budget is a ceiling, not an up-front
// cost.
func poolBlocks(o Options, sh kvcache.Shape, ctxLen int, kt, vt kvcache.Type) (int, error) {
	bs := o.BlockSize
	blockBytes := kvcache.TypedBlockBytes(sh, bs, kt, vt)
	perSeq := int64((ctxLen + bs - 1) / bs)
	var n int64
	switch {
	case o.ContextLen != 0 && o.MemoryFraction == 0:
		if o.ContextLen < 0 {
			return 0, fmt.Errorf("KV cache context length %d is negative", o.ContextLen)
		}
		n = int64((o.ContextLen + bs - 1) / bs)
	case o.MemoryMB != 0 && o.MemoryFraction == 0:
		if o.MemoryMB < 0 {
			return 0, fmt.Errorf("KV cache memory %d MB is negative", o.MemoryMB)
		}
		n = int64(o.MemoryMB) << 20 / blockBytes
		if n == 0 {
			return 0, fmt.Errorf("KV cache memory of %d MB is smaller than one block of %d tokens (%d bytes with keys %s and values %s)", o.MemoryMB, bs, blockBytes, kt, vt)
		}

	default:
		f := o.MemoryFraction
		if f == 0 {
			return 0, fmt.Errorf("no paged KV cache budget: set a memory fraction, a context length or megabytes (config.DefaultEngineOptions has the default fraction)")
		}
		if !(f > 0 && f <= 1) {
			return 0, fmt.Errorf("KV cache memory fraction %g: must be in (0, 1]", f)
		}
		// A fraction is bounded by what the scheduler can use: every
		// running sequence at full context, and as much again kept as
		// prefix cache. (Past that, blocks would only cost bookkeeping.)
		n = 2 * int64(o.MaxSeqs) * perSeq
		if total, avail, err := physicalMemory(); err == nil {
			// As mistral.rs's Utilization: the fraction of all memory,
			// less what is in use. A busy machine still gets room for one
			// sequence of full context rather than no server at all.
			budget := int64(f*float64(total)) - (total - avail)
			n = max(min(n, budget/blockBytes), perSeq)
		}
	}
	if total, _, err := physicalMemory(); err == nil && o.MemoryFraction == 0 && n*blockBytes > total {
		// The pool grows to its size under load: more than the machine has
		// ends in an out-of-memory kill, so it is refused up front.
		return 0, fmt.Errorf("a KV cache of %d blocks (%d MB) is more than this machine's %d MB of memory", n, n*blockBytes>>20, total>>20)
	}
	if n > 1<<31-2 {
		n = 1<<31 - 2
	}
	return int(n), nil
}

// kvWarnFraction is the share of physical memory past which a KV pool
// (which grows to its size under load) gets a startup warning: the model's
// weights, the page cache and everything else share the rest.
const kvWarnFraction = 0.8

// kvMemoryWarning is the warning for a pool of poolBytes, or "".
func kvMemoryWarning(poolBytes int64) string {
	total, _, err := physicalMemory()
	if err != nil || float64(poolBytes) <= kvWarnFraction*float64(total) {
		return ""
	}
	return fmt.Sprintf("the KV cache can grow to %d MB, %.0f%% of this machine's %d MB of memory (more than %.0f%%): "+
		"with the model's weights it may not fit; lower --pa-memory-mb or --pa-memory-fraction",
		poolBytes>>20, 100*float64(poolBytes)/float64(total), total>>20, 100*kvWarnFraction)
}

// physicalMemory reads the total and available memory from /proc/meminfo.
func physicalMemory() (total, avail int64, err error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "MemTotal" && name != "MemAvailable") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/meminfo: %s: %v", name, err)
		}
		if name == "MemTotal" {
			total = kb << 10
		} else {
			avail = kb << 10
		}
	}
	if total == 0 || avail == 0 {
		return 0, 0, fmt.Errorf("/proc/meminfo has no MemTotal/MemAvailable")
	}
	return total, avail, sc.Err()
}

// cacheTypes resolves the key and value types of o: CacheTypeK and
// CacheTypeV, each defaulting to CacheType.
func cacheTypes(o Options) (k, v kvcache.Type, err error) {
	pick := func(s string) (kvcache.Type, error) {
		if s == "" {
			s = o.CacheType
		}
		return kvcache.ParseType(s)
	}
	if k, err = pick(o.CacheTypeK); err != nil {
		return k, v, err
	}
	v, err = pick(o.CacheTypeV)
	return k, v, err
}
