// recording.js plays a recording back on its page: the output is all
// there as text; "Play with timing" hides it and shows each piece again at
// its time after the start (data-offset-ms), as the agent received it.
// Without it the page shows the whole output at once. data-played on the
// output says where a playback is (playing, done).
(function () {
  'use strict';

  var pre = document.getElementById('playback');
  var button = document.getElementById('play');
  if (!pre || !button) {
    return;
  }
  var pieces = pre.querySelectorAll('.piece');
  var timers = [];
  button.hidden = false;
  button.addEventListener('click', function () {
    timers.forEach(clearTimeout);
    timers = [];
    pre.setAttribute('data-played', 'playing');
    var left = pieces.length;
    var shown = function (p) {
      p.hidden = false;
      left--;
      if (left === 0) {
        pre.setAttribute('data-played', 'done');
      }
    };
    pieces.forEach(function (p) {
      p.hidden = true;
      var at = parseInt(p.getAttribute('data-offset-ms'), 10) || 0;
      timers.push(setTimeout(function () { shown(p); }, at));
    });
    if (left === 0) {
      pre.setAttribute('data-played', 'done');
    }
  });
})();
