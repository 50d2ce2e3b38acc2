(() => {
  const __tw_exc = (e) => {
    let name = typeof e, message = '', stack = '';
    try {
      if (e !== null && typeof e === 'object' && 'message' in e) {
        name = String(e.name); message = String(e.message); stack = String(e.stack || '');
      } else {
        message = String(e);
      }
    } catch (x) { message = '(the thrown value cannot be printed)'; }
    return { $tw: 'exception', name, message, stack };
  };
  const __tw_ok = (v, c) => {
    // Plain JSON primitives come back as themselves (the cheapest reply);
    // everything else as the tagged object.
    switch (typeof v) {
      case 'boolean': return v;
      case 'number': if (v === v && v !== Infinity && v !== -Infinity && (v !== 0 || 1 / v > 0)) return v; break;
      case 'string': if (v.length + 2 <= c[1]) return v; break;
      case 'object': if (v === null) return v; break;
    }
    try {
      const r = __tw_ser(v, { maxChars: c[1], maxDepth: c[2], maxItems: c[3], textMax: c[4] });
      return { $tw: 'ok', value: r.value, truncated: r.truncated };
    } catch (e) {
      return { $tw: 'ok', value: { $type: 'unserializable', error: String(e) }, truncated: false };
    }
  };
  const __tw_fn = function (__tw_run, __tw_cfg, __tw_started) {
    let __tw_v, __tw_then;
    try {
      __tw_v = __tw_run();
      // Read `then` once, as promise resolution would.
      if (__tw_v !== null && (typeof __tw_v === 'object' || typeof __tw_v === 'function')) __tw_then = __tw_v.then;
    } catch (e) {
      if (typeof __tw_started === 'function' && !__tw_started()) {
        let message = '';
        try { message = e && typeof e === 'object' ? String(e.message) : String(e); } catch (x) {}
        return { $tw: 'not_script', message };
      }
      return __tw_exc(e);
    }
    if (typeof __tw_then !== 'function') return __tw_ok(__tw_v, __tw_cfg);
    const __tw_settle = __tw_cfg[0];
    return (async () => {
      const __tw_deadline = {};
      let __tw_timer;
      try {
        // Call `then` in a microtask, as promise resolution would.
        const __tw_p = new Promise((res, rej) => { queueMicrotask(() => { try { __tw_then.call(__tw_v, res, rej); } catch (e) { rej(e); } }); });
        const v = await (__tw_settle > 0
          ? Promise.race([__tw_p, new Promise((_, rej) => { __tw_timer = setTimeout(() => rej(__tw_deadline), __tw_settle); })])
          : __tw_p);
        clearTimeout(__tw_timer);
        return __tw_ok(v, __tw_cfg);
      } catch (e) {
        clearTimeout(__tw_timer);
        if (e === __tw_deadline) return { $tw: 'promise_timeout' };
        return __tw_exc(e);
      }
    })();
  };
  let __tw_ev = null;
  try {
    if (typeof eval === 'function' && Function.prototype.toString.call(eval) === 'function eval() { [native code] }') __tw_ev = eval;
  } catch (e) {}
  __tw_fn.ev = __tw_ev;
  return __tw_fn;
  function __tw_ser(root, cfg) {
    let left = cfg.maxChars;
    let truncated = false;
    const seen = new Map();
    const T = (t, o) => Object.assign({ $type: t }, o || {});
    const excerpt = (s, n) => {
      s = String(s == null ? '' : s).replace(/\s+/g, ' ').trim();
      return s.length > n ? s.slice(0, n) + '\u2026' : s;
    };
    const str = (s) => {
      if (s.length + 2 <= left) { left -= s.length + 2; return s; }
      truncated = true;
      const keep = Math.max(0, left - 80);
      left = 0;
      return T('truncated', { kind: 'string', length: s.length, value: s.slice(0, keep) });
    };
    const num = (n) => {
      if (Number.isNaN(n)) return T('number', { repr: 'NaN' });
      if (n === Infinity) return T('number', { repr: 'Infinity' });
      if (n === -Infinity) return T('number', { repr: '-Infinity' });
      if (n === 0 && 1 / n < 0) return T('number', { repr: '-0' });
      left -= 8;
      return n;
    };
    const isWindow = (v) => { try { return v === v.window && typeof v.document === 'object'; } catch (e) { return false; } };
    const node = (v) => {
      const o = { nodeType: v.nodeType, nodeName: String(v.nodeName).toLowerCase() };
      if (v.nodeType === 1) {
        o.tag = v.localName;
        if (v.id) o.id = v.id;
        const c = v.classList ? Array.from(v.classList) : [];
        if (c.length) o.classes = c;
        o.text = excerpt(v.innerText !== undefined ? v.innerText : v.textContent, cfg.textMax);
      } else if (v.nodeType === 9) {
        o.url = String(v.URL); o.title = excerpt(v.title, cfg.textMax);
      } else {
        o.text = excerpt(v.textContent, cfg.textMax);
      }
      o.connected = v.isConnected;
      left -= 64;
      return T('node', o);
    };
    const items = (iter, size, depth, path, f) => {
      const out = [];
      let i = 0;
      for (const x of iter) {
        if (i >= cfg.maxItems || left <= 0) { truncated = true; out.push(T('truncated', { kind: 'items', omitted: size - i })); break; }
        out.push(f(x, i));
        i++;
      }
      return out;
    };
    const walk = (v, depth, path) => {
      if (left <= 0) { truncated = true; return T('truncated', { kind: 'size' }); }
      switch (typeof v) {
        case 'undefined': return T('undefined');
        case 'boolean': left -= 5; return v;
        case 'number': return num(v);
        case 'bigint': return T('bigint', { repr: v.toString() + 'n' });
        case 'string': return str(v);
        case 'symbol': return T('symbol', { description: v.toString() });
        case 'function': left -= 64; return T('function', { name: v.name || '(anonymous)', source: excerpt(Function.prototype.toString.call(v), 120) });
      }
      if (v === null) { left -= 4; return null; }
      if (seen.has(v)) return T('circular', { path: seen.get(v) });
      try {
        if (isWindow(v)) return T('window', { url: String(v.location.href), title: excerpt(v.document.title, cfg.textMax) });
        if (typeof Node === 'function' && v instanceof Node) return node(v);
        const tag = Object.prototype.toString.call(v).slice(8, -1);
        if (v instanceof Date) return T('date', { iso: Number.isNaN(v.getTime()) ? 'Invalid Date' : v.toISOString() });
        if (v instanceof RegExp) return T('regexp', { source: String(v) });
        if (v instanceof Error) return T('error', { name: String(v.name), message: String(v.message), stack: excerpt(v.stack, 300) });
        if (v instanceof Promise) return T('promise');
        if (v instanceof WeakMap || v instanceof WeakSet || v instanceof WeakRef) return T(tag.toLowerCase());
        if (v instanceof ArrayBuffer) return T('arraybuffer', { byteLength: v.byteLength });
        if (depth >= cfg.maxDepth) { truncated = true; return T('truncated', { kind: 'depth', depth }); }
        seen.set(v, path);
        try {
          if (v instanceof Map) {
            return T('map', { size: v.size, entries: items(v, v.size, depth, path, ([k, x], i) => [walk(k, depth + 1, path + '.<key ' + i + '>'), walk(x, depth + 1, path + '.<value ' + i + '>')]) });
          }
          if (v instanceof Set) {
            return T('set', { size: v.size, values: items(v, v.size, depth, path, (x, i) => walk(x, depth + 1, path + '.<' + i + '>')) });
          }
          if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
            return T('typedarray', { kind: tag, length: v.length, values: items(v, v.length, depth, path, (x) => (typeof x === 'bigint' ? T('bigint', { repr: x + 'n' }) : num(x))) });
          }
          if (Array.isArray(v)) {
            const out = [];
            for (let i = 0; i < v.length; i++) {
              if (i >= cfg.maxItems || left <= 0) { truncated = true; out.push(T('truncated', { kind: 'items', omitted: v.length - i })); break; }
              out.push(i in v ? walk(v[i], depth + 1, path + '[' + i + ']') : T('hole'));
              left -= 1;
            }
            return out;
          }
          if ((typeof NodeList === 'function' && v instanceof NodeList) || (typeof HTMLCollection === 'function' && v instanceof HTMLCollection)) {
            return T('nodelist', { kind: tag, length: v.length, items: items(v, v.length, depth, path, (x, i) => walk(x, depth + 1, path + '[' + i + ']')) });
          }
          const keys = Object.keys(v);
          const out = {};
          let i = 0;
          for (const k of keys) {
            if (i >= cfg.maxItems || left <= 0) { truncated = true; out['\u2026'] = T('truncated', { kind: 'keys', omitted: keys.length - i }); break; }
            i++;
            left -= k.length + 3;
            let x;
            try { x = v[k]; } catch (e) { out[k] = T('threw', { message: excerpt(e && e.message !== undefined ? e.message : e, cfg.textMax) }); continue; }
            out[k] = walk(x, depth + 1, path + '.' + k);
          }
          const proto = Object.getPrototypeOf(v);
          if (Object.prototype.hasOwnProperty.call(out, '$type') || (proto !== null && proto !== Object.prototype && Object.getPrototypeOf(proto) !== null)) {
            const ctor = proto && proto.constructor && proto.constructor.name;
            return T('object', { className: ctor || tag, value: out });
          }
          return out;
        } finally {
          seen.delete(v);
        }
      } catch (e) {
        return T('unserializable', { error: excerpt(e && e.message !== undefined ? e.message : e, cfg.textMax) });
      }
    };
    const value = walk(root, 0, '$');
    return { value, truncated };
  }
})()