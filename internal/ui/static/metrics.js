// Prometheus text-format parsing and the numbers of the metrics panel.
// Pure functions (no DOM), exposed as window.MistralrsMetrics so that the
// page and the browser test use the same code.
'use strict';
(function (global) {
  // parse reads the Prometheus text exposition format (version 0.0.4) into
  // samples {name, labels, value}. Comment, HELP and TYPE lines are skipped;
  // a malformed line is skipped rather than failing the whole scrape.
  function parse(text) {
    const out = [];
    const lines = String(text).split('\n');
    for (let raw of lines) {
      const line = raw.trim();
      if (line === '' || line[0] === '#') continue;
      const s = parseLine(line);
      if (s) out.push(s);
    }
    return out;
  }

  function parseLine(line) {
    let i = 0;
    while (i < line.length && /[A-Za-z0-9_:]/.test(line[i])) i++;
    if (i === 0) return null;
    const name = line.slice(0, i);
    const labels = {};
    if (line[i] === '{') {
      i++;
      for (;;) {
        while (line[i] === ' ' || line[i] === ',') i++;
        if (line[i] === '}') { i++; break; }
        const start = i;
        while (i < line.length && /[A-Za-z0-9_]/.test(line[i])) i++;
        const key = line.slice(start, i);
        if (key === '' || line[i] !== '=' || line[i + 1] !== '"') return null;
        i += 2;
        let val = '';
        for (;;) {
          if (i >= line.length) return null;
          const c = line[i++];
          if (c === '"') break;
          if (c === '\\') {
            const e = line[i++];
            val += e === 'n' ? '\n' : e;
          } else {
            val += c;
          }
        }
        labels[key] = val;
      }
    }
    const rest = line.slice(i).trim().split(/\s+/);
    if (rest.length === 0 || rest[0] === '') return null;
    const value = parseValue(rest[0]);
    if (value === null) return null;
    return { name: name, labels: labels, value: value };
  }

  function parseValue(s) {
    switch (s) {
      case '+Inf': case 'Inf': return Infinity;
      case '-Inf': return -Infinity;
      case 'NaN': return NaN;
    }
    const v = Number(s);
    return Number.isNaN(v) ? null : v;
  }

  // sum adds the samples of one family, optionally only those whose labels
  // include every pair of match; null when the family is absent.
  function sum(samples, name, match) {
    let total = null;
    for (const s of samples) {
      if (s.name !== name) continue;
      if (match && !Object.keys(match).every((k) => s.labels[k] === match[k])) continue;
      total = (total || 0) + s.value;
    }
    return total;
  }

  // histogram adds the buckets of a histogram family across all its label
  // sets: [[le, cumulative count], ...] sorted by le, +Inf last.
  function histogram(samples, family) {
    const byLe = new Map();
    for (const s of samples) {
      if (s.name !== family + '_bucket' || s.labels.le === undefined) continue;
      const le = parseValue(s.labels.le);
      if (le === null) continue;
      byLe.set(le, (byLe.get(le) || 0) + s.value);
    }
    return Array.from(byLe.entries()).sort((a, b) => a[0] - b[0]);
  }

  // byLabel maps one label's values to the summed samples of a family.
  function byLabel(samples, name, label) {
    const out = {};
    for (const s of samples) {
      if (s.name !== name) continue;
      const k = s.labels[label] || '';
      out[k] = (out[k] || 0) + s.value;
    }
    return out;
  }

  // snapshot picks the families the panel shows (names as the server
  // exports them; see docs/observability.md) out of one scrape.
  function snapshot(samples) {
    return {
      running: sum(samples, 'mistralrs_sequences_running'),
      waiting: sum(samples, 'mistralrs_sequences_waiting'),
      kvUsed: sum(samples, 'mistralrs_kv_cache_blocks_used'),
      kvTotal: sum(samples, 'mistralrs_kv_cache_blocks_total'),
      tokens: sum(samples, 'mistralrs_tokens_processed_total'),
      prefixLookups: sum(samples, 'mistralrs_prefix_cache_lookups_total'),
      prefixHits: sum(samples, 'mistralrs_prefix_cache_hits_total'),
      specProposed: sum(samples, 'mistralrs_speculative_draft_tokens_proposed_total'),
      specAccepted: sum(samples, 'mistralrs_speculative_draft_tokens_accepted_total'),
      encoderHits: sum(samples, 'mistralrs_encoder_cache_hits_total'),
      encoderMisses: sum(samples, 'mistralrs_encoder_cache_misses_total'),
      completed: byLabel(samples, 'mistralrs_sequences_completed_total', 'reason'),
      ttft: histogram(samples, 'mistralrs_time_to_first_token_seconds'),
      itl: histogram(samples, 'mistralrs_inter_token_latency_seconds'),
    };
  }

  // histogramDelta is newer minus older bucket by bucket; when a count went
  // down (the server restarted) the newer histogram is taken whole.
  function histogramDelta(older, newer) {
    const prev = new Map(older || []);
    const out = [];
    for (const [le, c] of newer) {
      const d = c - (prev.get(le) || 0);
      if (d < 0) return newer.slice();
      out.push([le, d]);
    }
    return out;
  }

  // quantile estimates the q-quantile of a cumulative histogram as
  // Prometheus's histogram_quantile does: linear interpolation inside the
  // bucket holding the rank, the lower bound of the first bucket being 0,
  // and the highest finite bound when the rank falls in the +Inf bucket.
  // NaN when the histogram holds no observations.
  function quantile(q, buckets) {
    if (!buckets || buckets.length === 0) return NaN;
    const total = buckets[buckets.length - 1][1];
    if (!(total > 0) || buckets[buckets.length - 1][0] !== Infinity) return NaN;
    const rank = q * total;
    let i = 0;
    while (i < buckets.length - 1 && buckets[i][1] < rank) i++;
    if (buckets[i][0] === Infinity) {
      return buckets.length >= 2 ? buckets[buckets.length - 2][0] : NaN;
    }
    const end = buckets[i][0];
    let start = 0;
    let below = 0;
    if (i > 0) {
      start = buckets[i - 1][0];
      below = buckets[i - 1][1];
    } else if (end <= 0) {
      return end;
    }
    const inBucket = buckets[i][1] - below;
    if (inBucket <= 0) return end;
    return start + (end - start) * (rank - below) / inBucket;
  }

  function counterDelta(older, newer) {
    if (newer === null || newer === undefined) return null;
    if (older === null || older === undefined || newer < older) return newer;
    return newer - older;
  }

  // ratio is part/whole, or null when whole is not positive.
  function ratio(part, whole) {
    return whole > 0 && part !== null ? part / whole : null;
  }

  // panel computes what the metrics panel shows from the oldest scrape of
  // the window (base), the previous scrape (prev) and the newest (cur),
  // each {t: milliseconds, snap: snapshot(...)}.
  function panel(base, prev, cur) {
    const c = cur.snap;
    const out = {
      running: c.running,
      waiting: c.waiting,
      kvUsed: c.kvUsed,
      kvTotal: c.kvTotal,
      kvFraction: ratio(c.kvUsed, c.kvTotal),
      tokensPerSec: null,
      ttftP50: NaN, ttftP95: NaN, itlP50: NaN, itlP95: NaN,
      prefixHitRate: null,
      specPresent: c.specProposed !== null && c.specProposed > 0,
      specAcceptance: null,
      // A model with a vision projector has looked an image up.
      encoderPresent: (c.encoderHits || 0) + (c.encoderMisses || 0) > 0,
      encoderHitRate: null,
      completed: c.completed,
    };
    if (prev && cur.t > prev.t) {
      const d = counterDelta(prev.snap.tokens, c.tokens);
      if (d !== null) out.tokensPerSec = d / ((cur.t - prev.t) / 1000);
    }
    const b = base ? base.snap : null;
    const ttft = histogramDelta(b && b.ttft, c.ttft);
    const itl = histogramDelta(b && b.itl, c.itl);
    out.ttftP50 = quantile(0.5, ttft);
    out.ttftP95 = quantile(0.95, ttft);
    out.itlP50 = quantile(0.5, itl);
    out.itlP95 = quantile(0.95, itl);
    out.prefixHitRate = ratio(counterDelta(b && b.prefixHits, c.prefixHits),
      counterDelta(b && b.prefixLookups, c.prefixLookups));
    if (out.specPresent) {
      out.specAcceptance = ratio(counterDelta(b && b.specAccepted, c.specAccepted),
        counterDelta(b && b.specProposed, c.specProposed));
    }
    if (out.encoderPresent) {
      const hits = counterDelta(b && b.encoderHits, c.encoderHits);
      const misses = counterDelta(b && b.encoderMisses, c.encoderMisses);
      out.encoderHitRate = ratio(hits, (hits || 0) + (misses || 0));
    }
    return out;
  }

  // Window keeps the scrapes of the last span milliseconds, plus the newest
  // one older than that as the baseline of the deltas.
  class Window {
    constructor(span) {
      this.span = span;
      this.items = [];
    }
    add(t, snap) {
      this.items.push({ t: t, snap: snap });
      while (this.items.length > 2 && this.items[1].t <= t - this.span) this.items.shift();
      const n = this.items.length;
      return panel(n > 1 ? this.items[0] : null, n > 1 ? this.items[n - 2] : null, this.items[n - 1]);
    }
  }

  global.MistralrsMetrics = {
    parse: parse,
    snapshot: snapshot,
    histogram: histogram,
    histogramDelta: histogramDelta,
    quantile: quantile,
    panel: panel,
    Window: Window,
  };
})(window);
