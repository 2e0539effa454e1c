// Follows a session's transcript as it grows, its record (state, runs,
// runner, times), and the agent's permission requests: server-sent events from /sessions/ID/events
// (dashboard/live.go). Without script, the page shows both as they were
// when loaded.
(() => {
  const pre = document.querySelector("pre.transcript[data-follow]");
  if (!pre || !window.EventSource) return;
  const source = new EventSource(pre.dataset.follow);
  const status = document.getElementById("live-status");
  source.addEventListener("reset", (e) => {
    pre.textContent = JSON.parse(e.data);
    pre.dataset.live = "1";
    if (status) status.textContent = "Live: new lines appear as the session goes on.";
  });
  source.addEventListener("append", (e) => {
    const end = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent += JSON.parse(e.data);
    if (end) pre.scrollTop = pre.scrollHeight;
  });
  const activity = document.getElementById("activity");
  source.addEventListener("activity", (e) => {
    if (activity) activity.innerHTML = JSON.parse(e.data);
  });
  const record = document.getElementById("record");
  source.addEventListener("record", (e) => {
    if (record) record.innerHTML = JSON.parse(e.data);
  });
  source.addEventListener("problem", (e) => {
    source.close();
    if (status) status.textContent = "Not live: " + JSON.parse(e.data);
  });
})();
