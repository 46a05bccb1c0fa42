package model

import "mistralrs/internal/kvcache"

// KVCache is one sequence's keys and values as the forward pass reads and
// appends them, per layer (kvcache.Cache; the implementations, a paged
// block table and a contiguous cache, live in internal/kvcache).
//
// Forward uses a cache as follows, for a step writing positions [pos, n):
// Truncate(pos), Extend(n), then per layer Put for each new position and
// Span reads of positions [0, n). A cache is used by one Forward at a time.
type KVCache = kvcache.Cache

// KVSpan is a run of cached rows of one layer (kvcache.Span).
type KVSpan = kvcache.Span
