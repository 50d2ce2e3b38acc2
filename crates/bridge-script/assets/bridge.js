// tabwarden dialog bridge (crate bridge-script; wire format in its crate doc).
//
// Replaces window.alert/confirm/prompt with functions that ask the agent
// through a synchronous GET to a made-up host under .invalid, which the
// supervisor pauses with Fetch and answers with Fetch.fulfillRequest. When the
// bridge cannot answer (CSP connect-src, the sync-xhr permissions policy, a
// detached frame, a network error, a non-200 status, a bad body) the ORIGINAL
// native function is called, so the dialog still reaches the supervisor
// natively. beforeunload is not touched.
//
// A function borrowed from a frame that is then removed runs in a detached
// realm, where the XHR fails and the native function shows nothing for its
// own window (field case C28). Like the native function, which acts on
// `this` when `this` is a window, such a call is handed to `this`'s own
// function when `this` is another window that is still attached.
//
// The placeholders in the last line are filled in by Bridge::script().
(function (token, host, maxChars, marker) {
  'use strict';
  // Everything the bridge calls is captured now, before page script runs, so
  // later page patches of XMLHttpRequest, JSON or Function.prototype cannot
  // break it or observe the token.
  var uncurry = Function.prototype.bind.bind(Function.prototype.call);
  var apply = uncurry(Function.prototype.apply);
  var hasOwn = uncurry(Object.prototype.hasOwnProperty);
  var defineProperty = Object.defineProperty;
  var getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  var parseJson = JSON.parse;
  var encode = encodeURIComponent;
  var toStr = String;
  var slice = uncurry(String.prototype.slice);
  var charCodeAt = uncurry(String.prototype.charCodeAt);
  var toWellFormed = String.prototype.toWellFormed ? uncurry(String.prototype.toWellFormed) : null;
  var getPrototypeOf = Object.getPrototypeOf;
  var base = 'https://' + host + '/' + token + '/dialog?';

  // IDL DOMString conversion, as the native functions do it (a Symbol throws).
  function domString(v) {
    if (typeof v === 'symbol') throw new TypeError('Cannot convert a Symbol value to a string');
    return toStr(v);
  }

  // At most maxChars UTF-16 units, never ending in half a surrogate pair.
  function clip(s) {
    if (s.length > maxChars) {
      s = slice(s, 0, maxChars);
      var last = charCodeAt(s, s.length - 1);
      if (last >= 0xd800 && last <= 0xdbff) s = slice(s, 0, s.length - 1);
    }
    return toWellFormed ? toWellFormed(s) : s;
  }

  // The getter of accessor `name` on `obj` or its prototypes, uncurried; null if none.
  function getterOf(obj, name) {
    for (var o = obj; o !== null; o = getPrototypeOf(o)) {
      var d = getOwnPropertyDescriptor(o, name);
      if (d) return d.get ? uncurry(d.get) : null;
    }
    return null;
  }

  function install(win) {
    try {
      if (hasOwn(win, marker)) return;
      defineProperty(win, marker, { value: true, enumerable: false, configurable: false, writable: false });
    } catch (e) {
      return; // cross-origin window, or not extensible: leave it alone
    }
    var nativeAlert = win.alert;
    var nativeConfirm = win.confirm;
    var nativePrompt = win.prompt;
    var XHR = win.XMLHttpRequest;
    var proto = XHR.prototype;
    var xhrOpen = uncurry(proto.open);
    var xhrSend = uncurry(proto.send);
    var xhrStatus = uncurry(getOwnPropertyDescriptor(proto, 'status').get);
    var xhrText = uncurry(getOwnPropertyDescriptor(proto, 'responseText').get);
    var closedOf = getterOf(win, 'closed');
    var forwarding = false;

    // True when this window has no browsing context any more (its frame was
    // removed): `closed` is true there in Chromium 156, and the XHR throws
    // "Document is already detached".
    function detached() {
      try {
        return (closedOf ? closedOf(win) : win.closed) === true;
      } catch (e) {
        return false;
      }
    }

    // The window to hand a call to when this realm is detached: `self` (the
    // call's `this`) when it is another window, same-origin and attached.
    // Otherwise null, and the call goes the usual way (bridge, then native).
    function liveReceiver(self) {
      if (self === undefined || self === null || self === win || !detached()) return null;
      try {
        return self.window === self && self.closed === false ? self : null;
      } catch (e) {
        return null; // not a window, or a hostile object
      }
    }

    // Calls `target`'s own `name` (the bridge installed there, else its native
    // function) with `args`. When it has none, it is this very function, or
    // this is a re-entry (a page wrapper that calls us back), the native
    // function of this realm acts on `target` instead, which Chromium shows
    // on `target`. Exceptions of the called function propagate, as natively.
    function forward(target, name, own, nativeFn, args) {
      if (forwarding) return apply(nativeFn, target, args);
      var fn = null;
      try {
        fn = target[name];
      } catch (e) {
        fn = null; // a cross-origin window: the native call below throws as natively
      }
      if (typeof fn !== 'function' || fn === own) return apply(nativeFn, target, args);
      forwarding = true;
      try {
        return apply(fn, target, args);
      } finally {
        forwarding = false;
      }
    }

    // One round trip to the supervisor. Throws on any failure.
    function ask(kind, message, defaultPrompt) {
      var url = base + 'kind=' + kind + '&message=' + encode(clip(message));
      if (defaultPrompt !== null) url += '&default=' + encode(clip(defaultPrompt));
      var x = new XHR();
      xhrOpen(x, 'GET', url, false);
      xhrSend(x);
      var status = xhrStatus(x);
      if (status !== 200) throw new Error('tabwarden bridge: status ' + status);
      var answer = parseJson(xhrText(x));
      if (answer === null || typeof answer !== 'object' || typeof answer.accept !== 'boolean') {
        throw new Error('tabwarden bridge: bad answer');
      }
      return answer;
    }

    // Method shorthand: named like the natives, length 0, not constructible.
    var bridged = {
      alert() {
        var message = arguments.length === 0 ? '' : domString(arguments[0]);
        var target = liveReceiver(this);
        if (target !== null) return forward(target, 'alert', bridged.alert, nativeAlert, [message]);
        try {
          ask('alert', message, null);
          return undefined;
        } catch (e) {
          return apply(nativeAlert, win, [message]);
        }
      },
      confirm() {
        var message = arguments[0] === undefined ? '' : domString(arguments[0]);
        var target = liveReceiver(this);
        if (target !== null) return forward(target, 'confirm', bridged.confirm, nativeConfirm, [message]);
        try {
          return ask('confirm', message, null).accept === true;
        } catch (e) {
          return apply(nativeConfirm, win, [message]);
        }
      },
      prompt() {
        var message = arguments[0] === undefined ? '' : domString(arguments[0]);
        var defaultPrompt = arguments[1] === undefined ? '' : domString(arguments[1]);
        var target = liveReceiver(this);
        if (target !== null) {
          return forward(target, 'prompt', bridged.prompt, nativePrompt, [message, defaultPrompt]);
        }
        var answer;
        try {
          answer = ask('prompt', message, defaultPrompt);
        } catch (e) {
          return apply(nativePrompt, win, [message, defaultPrompt]);
        }
        if (answer.accept !== true) return null;
        // Accepted without text: what pressing OK gives, the default text.
        return typeof answer.promptText === 'string' ? answer.promptText : defaultPrompt;
      },
    };
    win.alert = bridged.alert;
    win.confirm = bridged.confirm;
    win.prompt = bridged.prompt;

    // Same-origin child frames that already exist (the Runtime.evaluate path
    // into a loaded document). Frames created later get their own copy from
    // Page.addScriptToEvaluateOnNewDocument, about:blank and srcdoc included.
    try {
      for (var i = 0; i < win.frames.length; i++) install(win.frames[i]);
    } catch (e) {
      // a frame went away while we walked: nothing to do
    }
  }

  install(window);
})('__TABWARDEN_TOKEN__', '__TABWARDEN_HOST__', __TABWARDEN_MAX_CHARS__, '__TABWARDEN_MARKER__');
