// approvals.js keeps the approvals page live. It listens to /events
// (server-sent events); after each "approvals" event, and after every
// (re)connect, it fetches the inside of <section id="approvals"> from the
// URL in the section's data-source and swaps it in, so requests appear and
// disappear without a reload. It also counts down each request's expiry.
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

  readSkew();
  tick();
  window.setInterval(tick, 1000);
  connect();
})();
