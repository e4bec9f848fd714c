// approvals.js keeps the approvals page live. It listens to /events
// (server-sent events); after each "approvals" event, and after every
// (re)connect, it fetches the inside of <section id="approvals"> from the
// URL in the section's data-source and swaps it in, so requests appear and
// disappear without a reload. It also counts down each request's expiry.
//
// On the list of pending requests it keeps their number in the page's
// title ("(3) Approvals · postern"), so that a tab in the background shows
// that something waits, and, once the admin allowed it (a button on the
// page: browsers ask only after a click; the choice is remembered in
// localStorage), shows a browser notification for each request that
// arrives while the page is open — not for those already on the page when
// it loaded, and not twice for one request in two tabs.
//
// Without it the page still works: the decision forms are plain POSTs.
(function () {
  'use strict';

  var section = document.getElementById('approvals');
  if (!section) {
    return;
  }
  var source = section.getAttribute('data-source') || '';
  if (source.indexOf('/approvals/list') !== 0) {
    return;
  }

  // skew is the server's clock minus this browser's, in milliseconds,
  // taken from the data-now of the latest fragment, so that the countdown
  // agrees with the server about when a request expires.
  var skew = 0;
  // refreshedAfterExpiry remembers the ids whose expiry already asked for a
  // fresh list, so that a request the server has not yet marked expired
  // does not cause a refresh every second.
  var refreshedAfterExpiry = {};

  function readSkew() {
    var el = section.querySelector('.countdown[data-now]');
    if (!el) {
      return;
    }
    var now = Date.parse(el.getAttribute('data-now'));
    if (!isNaN(now)) {
      skew = now - Date.now();
    }
  }

  function tick() {
    var els = section.querySelectorAll('.countdown[data-expires]');
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      var expires = Date.parse(el.getAttribute('data-expires'));
      if (isNaN(expires)) {
        continue;
      }
      var left = Math.ceil((expires - (Date.now() + skew)) / 1000);
      if (left > 0) {
        el.textContent = left + ' s';
        continue;
      }
      el.textContent = 'expired';
      el.classList.add('expired');
      var article = el.closest('article.approval');
      if (article) {
        article.classList.add('expired');
        var buttons = article.querySelectorAll('button');
        for (var b = 0; b < buttons.length; b++) {
          buttons[b].disabled = true;
        }
        var id = article.getAttribute('data-id');
        if (id && !refreshedAfterExpiry[id]) {
          refreshedAfterExpiry[id] = true;
          // The server marks a request expired when it is next listed.
          window.setTimeout(refresh, 1000);
        }
      }
    }
  }

  // replace swaps in a new list, keeping what the admin was typing: a deny
  // note half written, and the focus, survive a request arriving.
  function replace(html) {
    var notes = {};
    var inputs = section.querySelectorAll('article.approval input.note');
    for (var i = 0; i < inputs.length; i++) {
      var id = inputs[i].closest('article.approval').getAttribute('data-id');
      if (inputs[i].value !== '') {
        notes[id] = inputs[i].value;
      }
    }
    var active = document.activeElement;
    var focus = null;
    if (active && section.contains(active)) {
      var art = active.closest('article.approval');
      if (art) {
        focus = {id: art.getAttribute('data-id'), cls: active.className,
          start: active.selectionStart, end: active.selectionEnd};
      }
    }
    section.innerHTML = html;
    var arts = section.querySelectorAll('article.approval');
    for (var j = 0; j < arts.length; j++) {
      var aid = arts[j].getAttribute('data-id');
      var note = arts[j].querySelector('input.note');
      if (note && Object.prototype.hasOwnProperty.call(notes, aid)) {
        note.value = notes[aid];
      }
      if (focus && focus.id === aid && focus.cls) {
        var el = arts[j].querySelector('.' + focus.cls.split(' ')[0]);
        if (el) {
          el.focus();
          if (typeof focus.start === 'number' && el.setSelectionRange) {
            el.setSelectionRange(focus.start, focus.end);
          }
        }
      }
    }
  }

  // One fetch at a time; a change during a fetch asks for one more.
  var loading = false;
  var again = false;

  function toLogin() {
    window.location.assign('/login?next=' + encodeURIComponent(window.location.pathname + window.location.search));
  }

  function refresh() {
    if (loading) {
      again = true;
      return;
    }
    loading = true;
    fetch(source, {credentials: 'same-origin', cache: 'no-store', headers: {'Accept': 'text/html'}})
      .then(function (resp) {
        if (!resp.redirected && !resp.ok) {
          throw new Error('HTTP ' + resp.status);
        }
        if (resp.redirected || resp.headers.get('X-Postern-Fragment') !== 'approval-list') {
          // The session ended: the answer is the login page.
          toLogin();
          return null;
        }
        return resp.text();
      })
      .then(function (html) {
        if (html === null) {
          return;
        }
        replace(html);
        section.removeAttribute('data-stale');
        readSkew();
        tick();
        showCount();
        notifyNew();
      })
      .catch(function () {
        section.setAttribute('data-stale', 'true');
      })
      .then(function () {
        loading = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  var events = null;
  var retryTimer = null;

  function connect() {
    retryTimer = null;
    if (!window.EventSource) {
      return;
    }
    events = new EventSource('/events');
    events.addEventListener('approvals', refresh);
    // Every (re)connect may have missed changes: fetch the list again.
    events.addEventListener('open', refresh);
    events.addEventListener('error', function () {
      section.setAttribute('data-stale', 'true');
      // EventSource retries by itself unless the answer was not a stream
      // (the session ended, or the server answered an error): then it
      // closes, and we try again later; refresh notices a lost session.
      if (events.readyState === EventSource.CLOSED && retryTimer === null) {
        retryTimer = window.setTimeout(function () {
          refresh();
          connect();
        }, 5000);
      }
    });
  }

  // --- The pending count in the title, and browser notifications ---

  var listMode = source === '/approvals/list';
  var baseTitle = document.title.replace(/^\(\d+\) /, '');
  // Keys of localStorage: the admin's answer to the offer ("granted",
  // "denied", "default" or "dismissed"), and the ids of the requests a
  // notification was shown for, in any tab (the newest maxNotified).
  var choiceKey = 'postern.notifications';
  var notifiedKey = 'postern.notified';
  var maxNotified = 200;
  // known holds the ids this page has seen: those on it when it loaded,
  // which the admin sees anyway, and every one since.
  var known = {};

  function storageGet(key) {
    try {
      return window.localStorage.getItem(key);
    } catch (e) {
      return null;
    }
  }

  function storageSet(key, value) {
    try {
      window.localStorage.setItem(key, value);
    } catch (e) {
      // Storage is off (a private window): notifications still work,
      // without the memory across tabs.
    }
  }

  function pendingArticles() {
    return section.querySelectorAll('article.approval[data-id]');
  }

  function showCount() {
    if (!listMode) {
      return;
    }
    var n = pendingArticles().length;
    document.title = n > 0 ? '(' + n + ') ' + baseTitle : baseTitle;
  }

  // escapeInvisible shows control, direction and zero-width characters as
  // <U+XXXX>, as the server does (policy.Visible): a notification must show
  // the command that runs, not what a direction override makes of it.
  function escapeInvisible(text) {
    return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u00a0\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffc]/g,
      function (c) {
        return '<U+' + ('000' + c.charCodeAt(0).toString(16).toUpperCase()).slice(-4) + '>';
      });
  }

  function textOf(article, selector) {
    var el = article.querySelector(selector);
    return el ? el.textContent.trim() : '';
  }

  // nameOf is the first word of a fact: the agent's or connection's name,
  // without the source address or target the card adds after it.
  function nameOf(article, selector) {
    return textOf(article, selector).split(/\s+/)[0];
  }

  function notifiedIDs() {
    try {
      var list = JSON.parse(storageGet(notifiedKey) || '[]');
      return Array.isArray(list) ? list : [];
    } catch (e) {
      return [];
    }
  }

  function rememberNotified(id) {
    var list = notifiedIDs();
    list.push(id);
    storageSet(notifiedKey, JSON.stringify(list.slice(-maxNotified)));
  }

  function showNotification(article, id) {
    // A change of configuration (kind change) shows its summary and who
    // asked; the card has no command.
    var change = article.getAttribute('data-kind') === 'change';
    var op = escapeInvisible(textOf(article, change ? '.change-summary' : 'pre.command .cmd'));
    if (op.length > 200) {
      op = op.slice(0, 200) + '…';
    }
    var title = change ? 'Change waits for a second admin' :
      'Approval needed: ' + textOf(article, '.class') + ' on ' + nameOf(article, '.alias');
    var n = new window.Notification(title, {
      body: (change ? 'asked by ' + textOf(article, '.requested-by') : nameOf(article, '.agent')) + ': ' + op,
      tag: 'postern-' + id
    });
    n.onclick = function () {
      window.focus();
      window.location.assign('/approvals/' + encodeURIComponent(id));
      n.close();
    };
  }

  function markKnown() {
    var arts = pendingArticles();
    for (var i = 0; i < arts.length; i++) {
      known[arts[i].getAttribute('data-id')] = true;
    }
  }

  function notifyNew() {
    if (!listMode) {
      return;
    }
    var arts = pendingArticles();
    var fresh = [];
    for (var i = 0; i < arts.length; i++) {
      var id = arts[i].getAttribute('data-id');
      if (!known[id]) {
        known[id] = true;
        fresh.push(arts[i]);
      }
    }
    if (fresh.length === 0 || !window.Notification || window.Notification.permission !== 'granted') {
      return;
    }
    var shown = notifiedIDs();
    for (var j = 0; j < fresh.length; j++) {
      var fid = fresh[j].getAttribute('data-id');
      if (shown.indexOf(fid) >= 0) {
        continue; // another tab showed it
      }
      rememberNotified(fid);
      try {
        showNotification(fresh[j], fid);
      } catch (e) {
        // A browser that allows notifications only from a service worker.
      }
    }
  }

  // offerNotifications shows the page's button that asks the browser for
  // permission, once: not after the admin answered, here or before.
  function offerNotifications() {
    var offer = document.getElementById('notify-offer');
    if (!listMode || !offer || !window.Notification || window.Notification.permission !== 'default' ||
        storageGet(choiceKey) !== null) {
      return;
    }
    offer.hidden = false;
    var answered = function (permission) {
      storageSet(choiceKey, permission || 'default');
      offer.hidden = true;
    };
    document.getElementById('notify-enable').addEventListener('click', function () {
      var p = window.Notification.requestPermission(answered);
      if (p && typeof p.then === 'function') {
        p.then(answered);
      }
    });
    document.getElementById('notify-dismiss').addEventListener('click', function () {
      answered('dismissed');
    });
  }

  // A command box's scroll marker hides once the box is scrolled to its
  // end (scroll events do not bubble: listen in the capture phase).
  document.addEventListener('scroll', function (ev) {
    var box = ev.target;
    if (box && box.matches && box.matches('pre.command')) {
      box.toggleAttribute('data-end', box.scrollTop + box.clientHeight >= box.scrollHeight - 2);
    }
  }, true);

  markKnown();
  showCount();
  offerNotifications();
  readSkew();
  tick();
  window.setInterval(tick, 1000);
  connect();
})();
