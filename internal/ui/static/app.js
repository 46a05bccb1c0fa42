// The chat page: model picker, streamed chat completions with stop,
// images attached to a message (file picker, paste, drag and drop; sent
// as image_url data URLs), settings, a conversation kept in localStorage,
// and the metrics panel.
//
// Every URL is relative to the page's <base> (the server sets it to the
// directory of /ui/), so the page works under any base path a proxy adds.
// Model output only ever reaches the page through textContent.
'use strict';
(function () {
  const STORE_KEY = 'mistralrs.ui.v1';
  const POLL_MS = 2000;
  const WINDOW_MS = 60000;
  const apiRoot = new URL('../', document.baseURI);
  const api = (p) => new URL(p, apiRoot).toString();
  const $ = (id) => document.getElementById(id);

  const el = {
    model: $('model'), status: $('status'), newChat: $('new-chat'),
    transcript: $('transcript'), empty: $('empty'),
    composer: $('composer'), prompt: $('prompt'), send: $('send'), stop: $('stop'),
    attach: $('attach'), imageFile: $('image-file'), attachments: $('attachments'),
    system: $('system'), temperature: $('temperature'), topP: $('top-p'), maxTokens: $('max-tokens'),
    apiKey: $('api-key'), extra: $('extra'), extraError: $('extra-error'),
    metricsState: $('metrics-state'),
  };

  const state = loadState();
  let inflight = null; // {controller, reply, body}
  let attached = []; // data URLs of the images for the next message

  // ---- storage ----

  function loadState() {
    let s = null;
    try {
      s = JSON.parse(localStorage.getItem(STORE_KEY) || 'null');
    } catch (e) {
      s = null;
    }
    if (!s || typeof s !== 'object') s = {};
    if (!Array.isArray(s.messages)) s.messages = [];
    s.messages = s.messages.filter((m) => m && typeof m === 'object' &&
      (m.role === 'user' || m.role === 'assistant') && typeof m.content === 'string');
    for (const m of s.messages) {
      if (m.images !== undefined) {
        m.images = Array.isArray(m.images) ? m.images.filter(isImageURL) : [];
        if (m.images.length === 0) delete m.images;
      }
      if (m.pending) { // the page was closed while this answer streamed
        delete m.pending;
        m.meta = (m.meta ? m.meta + ' · ' : '') + 'interrupted';
      }
    }
    if (!s.settings || typeof s.settings !== 'object') s.settings = {};
    if (typeof s.model !== 'string') s.model = '';
    return s;
  }

  function save() {
    try {
      localStorage.setItem(STORE_KEY, JSON.stringify(state));
    } catch (e) {
      // Images are what outgrows the browser's storage: keep the text.
      const hasImages = state.messages.some((m) => m.images);
      try {
        if (!hasImages) throw e;
        const textOnly = Object.assign({}, state, {
          messages: state.messages.map((m) => Object.assign({}, m, { images: undefined })),
        });
        localStorage.setItem(STORE_KEY, JSON.stringify(textOnly));
        setStatus('images are too large to keep in this browser: a reload shows the text only', true);
      } catch (e2) {
        setStatus('could not save the conversation: ' + e2.message, true);
      }
    }
  }

  // isImageURL admits only the data URLs of images this page read itself.
  function isImageURL(u) {
    return typeof u === 'string' && /^data:image\/(png|jpeg|webp|gif);base64,/.test(u);
  }

  function thumbnail(url, alt) {
    const img = document.createElement('img');
    img.className = 'thumb';
    img.alt = alt;
    img.src = url;
    return img;
  }

  function setStatus(text, isError) {
    el.status.textContent = text;
    el.status.classList.toggle('error', !!isError);
  }

  // ---- settings ----

  const fields = [
    ['system', el.system], ['temperature', el.temperature], ['top_p', el.topP],
    ['max_tokens', el.maxTokens], ['api_key', el.apiKey], ['extra', el.extra],
  ];
  let modelsTimer = 0;
  for (const [key, input] of fields) {
    if (typeof state.settings[key] === 'string') input.value = state.settings[key];
    input.addEventListener('input', () => {
      state.settings[key] = input.value;
      save();
      if (key === 'extra') extraFields();
      if (key === 'api_key') { // the model list may need the key
        clearTimeout(modelsTimer);
        modelsTimer = setTimeout(loadModels, 400);
      }
    });
  }

  function authHeaders() {
    const h = {};
    const key = (state.settings.api_key || '').trim();
    if (key) h.Authorization = 'Bearer ' + key;
    return h;
  }

  // extraFields parses the advanced JSON object; null (and a visible
  // message) when it is not one.
  function extraFields() {
    const text = (el.extra.value || '').trim();
    el.extraError.hidden = true;
    if (text === '') return {};
    try {
      const v = JSON.parse(text);
      if (v && typeof v === 'object' && !Array.isArray(v)) return v;
      throw new Error('not a JSON object');
    } catch (e) {
      el.extraError.textContent = 'Extra request fields: ' + e.message;
      el.extraError.hidden = false;
      return null;
    }
  }

  function numberSetting(input) {
    const s = input.value.trim();
    if (s === '') return undefined;
    const v = Number(s);
    return Number.isFinite(v) ? v : undefined;
  }

  // ---- models ----

  async function loadModels() {
    try {
      const resp = await fetch(api('v1/models'), { headers: authHeaders(), cache: 'no-store' });
      if (!resp.ok) throw new Error(await errorText(resp));
      const body = await resp.json();
      const ids = (body.data || []).map((m) => ({ id: String(m.id), status: m.status ? String(m.status) : '' }));
      el.model.replaceChildren();
      for (const m of ids) {
        const opt = document.createElement('option');
        opt.value = m.id;
        opt.textContent = m.status ? m.id + ' (' + m.status + ')' : m.id;
        el.model.appendChild(opt);
      }
      const real = ids.filter((m) => m.id !== 'default');
      let pick = ids.some((m) => m.id === state.model) ? state.model : (real[0] || ids[0] || { id: '' }).id;
      el.model.value = pick;
      setStatus('');
    } catch (e) {
      setStatus('models: ' + e.message, true);
    }
  }

  el.model.addEventListener('change', () => {
    state.model = el.model.value;
    save();
  });

  // ---- transcript ----

  function renderAll() {
    el.transcript.replaceChildren();
    el.empty.hidden = state.messages.length > 0;
    el.transcript.appendChild(el.empty);
    state.messages.forEach((m, i) => el.transcript.appendChild(renderMessage(m, i)));
    scrollDown(true);
  }

  // renderMessage builds one message; its text is set with textContent.
  function renderMessage(m, index) {
    const box = document.createElement('article');
    box.className = 'msg msg-' + m.role + (m.error ? ' msg-error' : '');
    box.dataset.index = String(index);
    const head = document.createElement('div');
    head.className = 'msg-head';
    const role = document.createElement('span');
    role.className = 'role';
    role.textContent = m.role === 'user' ? 'You' : 'Assistant';
    const meta = document.createElement('span');
    meta.className = 'meta';
    meta.textContent = m.pending ? 'streaming…' : (m.meta || '');
    const actions = document.createElement('span');
    actions.className = 'actions';
    const copy = document.createElement('button');
    copy.type = 'button';
    copy.className = 'copy';
    copy.textContent = 'Copy';
    copy.addEventListener('click', () => copyText(m.content, copy));
    actions.appendChild(copy);
    if (m.role === 'assistant' && index === state.messages.length - 1) {
      const regen = document.createElement('button');
      regen.type = 'button';
      regen.className = 'regenerate';
      regen.textContent = 'Regenerate';
      regen.disabled = !!inflight;
      regen.addEventListener('click', regenerate);
      actions.appendChild(regen);
    }
    head.append(role, meta, actions);
    box.appendChild(head);
    if (m.images && m.images.length) {
      const imgs = document.createElement('div');
      imgs.className = 'msg-images';
      m.images.forEach((u, i) => imgs.appendChild(thumbnail(u, 'image ' + (i + 1))));
      box.appendChild(imgs);
    }
    const body = document.createElement('div');
    body.className = 'msg-body';
    body.textContent = m.content;
    box.appendChild(body);
    return box;
  }

  function messageBox(index) {
    return el.transcript.querySelector('article[data-index="' + index + '"]');
  }

  function updateMessage(m) {
    const box = messageBox(state.messages.indexOf(m));
    if (!box) return;
    box.querySelector('.msg-body').textContent = m.content;
    box.querySelector('.meta').textContent = m.pending ? 'streaming…' : (m.meta || '');
    box.classList.toggle('msg-error', !!m.error);
  }

  function scrollDown(force) {
    const t = el.transcript;
    if (force || t.scrollHeight - t.scrollTop - t.clientHeight < 80) t.scrollTop = t.scrollHeight;
  }

  async function copyText(text, button) {
    let ok = false;
    try {
      if (navigator.clipboard && window.isSecureContext) {
        await navigator.clipboard.writeText(text);
        ok = true;
      }
    } catch (e) {
      ok = false;
    }
    if (!ok) {
      const ta = document.createElement('textarea');
      ta.value = text;
      ta.setAttribute('readonly', '');
      ta.className = 'offscreen';
      document.body.appendChild(ta);
      ta.select();
      try {
        ok = document.execCommand('copy');
      } catch (e) {
        ok = false;
      }
      ta.remove();
    }
    button.textContent = ok ? 'Copied' : 'Copy failed';
    setTimeout(() => { button.textContent = 'Copy'; }, 1500);
  }

  // ---- chat ----

  function setBusy(busy) {
    el.send.disabled = busy;
    el.stop.disabled = !busy;
    for (const b of el.transcript.querySelectorAll('button.regenerate')) b.disabled = busy;
  }

  function requestBody(history) {
    const extra = extraFields();
    if (extra === null) return null;
    const messages = [];
    const system = (state.settings.system || '').trim();
    if (system) messages.push({ role: 'system', content: system });
    for (const m of history) {
      if (m.role === 'assistant' && m.error && m.content === '') continue;
      messages.push({ role: m.role, content: messageContent(m) });
    }
    const body = { model: el.model.value || undefined, messages: messages };
    const t = numberSetting(el.temperature);
    const p = numberSetting(el.topP);
    const n = numberSetting(el.maxTokens);
    if (t !== undefined) body.temperature = t;
    if (p !== undefined) body.top_p = p;
    if (n !== undefined) body.max_tokens = Math.round(n);
    Object.assign(body, extra);
    body.stream = true;
    body.stream_options = Object.assign({}, extra.stream_options, { include_usage: true });
    return body;
  }

  // messageContent is a message's content on the wire: its text, or with
  // images an array of a text part and image_url parts.
  function messageContent(m) {
    if (!m.images || m.images.length === 0) return m.content;
    const parts = [];
    if (m.content !== '') parts.push({ type: 'text', text: m.content });
    for (const u of m.images) parts.push({ type: 'image_url', image_url: { url: u } });
    return parts;
  }

  // send asks for an answer to the conversation plus text and the attached
  // images (text null: as it is, to regenerate); false when the request
  // cannot be made.
  function send(text) {
    if (inflight) return false;
    const history = state.messages.slice();
    if (text !== null) {
      const m = { role: 'user', content: text };
      if (attached.length) m.images = attached.slice();
      history.push(m);
    }
    const body = requestBody(history);
    if (body === null) return false;
    if (text !== null) state.messages.push(history[history.length - 1]);
    const reply = { role: 'assistant', content: '', meta: '', pending: true };
    state.messages.push(reply);
    save();
    const controller = new AbortController();
    inflight = { controller: controller, reply: reply };
    renderAll();
    setBusy(true);
    stream(body, reply, controller.signal).then(() => {
      inflight = null;
      setBusy(false);
      save();
      renderAll();
    });
    return true;
  }

  function regenerate() {
    if (inflight) return;
    const last = state.messages[state.messages.length - 1];
    if (!last || last.role !== 'assistant') return;
    state.messages.pop();
    if (!send(null)) state.messages.push(last);
  }

  // stream posts body and appends the streamed deltas to reply.
  async function stream(body, reply, signal) {
    const started = performance.now();
    let first = 0;
    let chunks = 0;
    let usage = null;
    let finish = null;
    let lastSave = started;
    try {
      const headers = Object.assign({ 'Content-Type': 'application/json', Accept: 'text/event-stream' }, authHeaders());
      const resp = await fetch(api('v1/chat/completions'), {
        method: 'POST', headers: headers, body: JSON.stringify(body), signal: signal, cache: 'no-store',
      });
      if (!resp.ok) throw new Error(await errorText(resp));
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      let buf = '';
      let done = false;
      while (!done) {
        const r = await reader.read();
        if (r.done) break;
        buf += decoder.decode(r.value, { stream: true }).replace(/\r\n?/g, '\n');
        let cut;
        while (!done && (cut = buf.indexOf('\n\n')) >= 0) {
          const event = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          const data = event.split('\n').filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(l[5] === ' ' ? 6 : 5)).join('\n');
          if (data === '') continue; // a keep-alive comment
          if (data === '[DONE]') { done = true; break; }
          const chunk = JSON.parse(data);
          if (chunk.error) throw new Error(chunk.error.message || JSON.stringify(chunk.error));
          if (chunk.usage) usage = chunk.usage;
          const choice = chunk.choices && chunk.choices[0];
          if (!choice) continue;
          if (choice.finish_reason) finish = choice.finish_reason;
          const delta = choice.delta && typeof choice.delta.content === 'string' ? choice.delta.content : '';
          if (delta !== '') {
            if (!first) first = performance.now();
            chunks++;
            reply.content += delta;
            updateMessage(reply);
            scrollDown(false);
          }
        }
        const now = performance.now();
        if (now - lastSave > 1000) {
          lastSave = now;
          save();
        }
      }
      if (done) reader.cancel().catch(() => {});
    } catch (e) {
      if (e.name === 'AbortError') {
        finish = 'stopped';
      } else {
        reply.error = true;
        finish = 'error: ' + e.message;
      }
    }
    delete reply.pending;
    reply.meta = describe(started, first, chunks, usage, finish);
  }

  function describe(started, first, chunks, usage, finish) {
    const parts = [];
    const end = performance.now();
    const tokens = usage && usage.completion_tokens ? usage.completion_tokens : chunks;
    if (tokens) parts.push(tokens + (tokens === 1 ? ' token' : ' tokens'));
    if (first) {
      parts.push('first token ' + fmtSeconds((first - started) / 1000));
      if (tokens > 1 && end > first) parts.push(((tokens - 1) / ((end - first) / 1000)).toFixed(1) + ' tok/s');
    }
    const reasons = { stop: '', length: 'max tokens reached', canceled: 'canceled by the server' };
    const why = finish && Object.prototype.hasOwnProperty.call(reasons, finish) ? reasons[finish] : finish;
    if (why) parts.push(why);
    return parts.join(' · ');
  }

  async function errorText(resp) {
    let msg = resp.status + ' ' + resp.statusText;
    try {
      const text = await resp.text();
      try {
        const j = JSON.parse(text);
        if (j && j.error) msg = resp.status + ': ' + (j.error.message || JSON.stringify(j.error));
        else if (text) msg = resp.status + ': ' + text.slice(0, 300);
      } catch (e) {
        if (text) msg = resp.status + ': ' + text.slice(0, 300);
      }
    } catch (e) {
      // keep the status line
    }
    return msg;
  }

  el.composer.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const text = el.prompt.value;
    if ((text.trim() === '' && attached.length === 0) || inflight) return;
    if (send(text)) {
      el.prompt.value = '';
      attached = [];
      renderAttachments();
    }
  });

  // ---- attached images ----

  function renderAttachments() {
    el.attachments.replaceChildren();
    el.attachments.hidden = attached.length === 0;
    attached.forEach((u, i) => {
      const box = document.createElement('span');
      box.className = 'attachment';
      const remove = document.createElement('button');
      remove.type = 'button';
      remove.textContent = '×';
      remove.title = 'Remove this image';
      remove.addEventListener('click', () => {
        attached.splice(i, 1);
        renderAttachments();
      });
      box.append(thumbnail(u, 'attached image ' + (i + 1)), remove);
      el.attachments.appendChild(box);
    });
  }

  // attachFiles reads the image files among files as data URLs.
  function attachFiles(files) {
    for (const f of Array.from(files || [])) {
      if (!/^image\/(png|jpeg|webp|gif)$/.test(f.type)) {
        setStatus(f.name + ': not a PNG, JPEG, WebP or GIF image', true);
        continue;
      }
      const reader = new FileReader();
      reader.onload = () => {
        if (isImageURL(reader.result)) {
          attached.push(reader.result);
          renderAttachments();
        }
      };
      reader.onerror = () => setStatus(f.name + ': ' + (reader.error ? reader.error.message : 'unreadable'), true);
      reader.readAsDataURL(f);
    }
  }

  el.attach.addEventListener('click', () => el.imageFile.click());
  el.imageFile.addEventListener('change', () => {
    attachFiles(el.imageFile.files);
    el.imageFile.value = '';
  });
  el.prompt.addEventListener('paste', (ev) => {
    const files = ev.clipboardData ? Array.from(ev.clipboardData.files || []) : [];
    if (files.some((f) => f.type.startsWith('image/'))) {
      ev.preventDefault(); // the text of a pasted image is its file name
      attachFiles(files);
    }
  });
  el.composer.addEventListener('dragover', (ev) => {
    if (ev.dataTransfer && Array.from(ev.dataTransfer.types || []).includes('Files')) {
      ev.preventDefault();
      el.composer.classList.add('dragging');
    }
  });
  el.composer.addEventListener('dragleave', () => el.composer.classList.remove('dragging'));
  el.composer.addEventListener('drop', (ev) => {
    el.composer.classList.remove('dragging');
    if (ev.dataTransfer && ev.dataTransfer.files && ev.dataTransfer.files.length) {
      ev.preventDefault();
      attachFiles(ev.dataTransfer.files);
    }
  });
  el.prompt.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      el.composer.requestSubmit();
    }
  });
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && inflight) inflight.controller.abort();
  });
  el.stop.addEventListener('click', () => {
    if (inflight) inflight.controller.abort();
  });
  el.newChat.addEventListener('click', () => {
    if (inflight) inflight.controller.abort();
    attached = [];
    renderAttachments();
    state.messages = [];
    save();
    renderAll();
  });

  // ---- metrics panel ----

  const M = window.MistralrsMetrics;
  const win = new M.Window(WINDOW_MS);

  function fmtSeconds(s) {
    if (!Number.isFinite(s)) return '–';
    if (s < 1) return (s * 1000).toFixed(s < 0.01 ? 2 : 0) + ' ms';
    return s.toFixed(2) + ' s';
  }
  function fmtPercent(r) {
    return r === null || !Number.isFinite(r) ? '–' : (r * 100).toFixed(1) + '%';
  }
  function fmtCount(v) {
    return v === null || v === undefined ? '–' : String(Math.round(v));
  }
  function show(id, text) {
    $(id).textContent = text;
  }

  function showPanel(p) {
    show('m-running', fmtCount(p.running));
    show('m-waiting', fmtCount(p.waiting));
    show('m-kv', p.kvFraction === null ? (p.kvTotal === 0 ? 'n/a' : '–')
      : fmtPercent(p.kvFraction) + ' (' + fmtCount(p.kvUsed) + ' / ' + fmtCount(p.kvTotal) + ' blocks)');
    show('m-tps', p.tokensPerSec === null ? '–' : p.tokensPerSec.toFixed(1));
    show('m-ttft', fmtSeconds(p.ttftP50) + ' / ' + fmtSeconds(p.ttftP95));
    show('m-itl', fmtSeconds(p.itlP50) + ' / ' + fmtSeconds(p.itlP95));
    show('m-prefix', fmtPercent(p.prefixHitRate));
    for (const n of document.querySelectorAll('.spec')) n.hidden = !p.specPresent;
    show('m-spec', fmtPercent(p.specAcceptance));
    for (const n of document.querySelectorAll('.encoder')) n.hidden = !p.encoderPresent;
    show('m-encoder', fmtPercent(p.encoderHitRate));
    const c = p.completed || {};
    const total = Object.values(c).reduce((a, b) => a + b, 0);
    show('m-completed', fmtCount(total) + (c.canceled ? ' (' + fmtCount(c.canceled) + ' canceled)' : ''));
  }

  async function pollMetrics() {
    if (!document.hidden) {
      try {
        const resp = await fetch(api('metrics'), {
          headers: Object.assign({ Accept: 'text/plain;version=0.0.4' }, authHeaders()), cache: 'no-store',
        });
        if (!resp.ok) throw new Error(await errorText(resp));
        const snap = M.snapshot(M.parse(await resp.text()));
        showPanel(win.add(Date.now(), snap));
        el.metricsState.textContent = 'updated ' + new Date().toLocaleTimeString();
        el.metricsState.classList.remove('error');
      } catch (e) {
        el.metricsState.textContent = 'metrics unavailable: ' + e.message;
        el.metricsState.classList.add('error');
      }
    }
    setTimeout(pollMetrics, POLL_MS);
  }

  renderAll();
  loadModels();
  pollMetrics();
})();
