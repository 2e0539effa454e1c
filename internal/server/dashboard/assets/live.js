// Follows a session's conversation as it grows, its record (state, runs,
// runner, times), and the agent's permission requests: server-sent events
// from /sessions/ID/events (internal/server/dashboard/live.go), each carrying HTML the
// server rendered. Without script, the page shows them as they were when
// loaded. The conversation follows its end unless the person has scrolled
// up; its code blocks get a copy button.
(() => {
  const conv = document.querySelector("#conversation[data-follow]");
  if (!conv) return;
  const copyButtons = (root) => {
    root.querySelectorAll("pre").forEach((pre) => {
      if (pre.previousElementSibling?.classList.contains("copy-code")) return;
      const b = document.createElement("button");
      b.type = "button";
      b.className = "copy-code";
      b.textContent = "Copy";
      b.setAttribute("aria-label", "Copy this code");
      b.addEventListener("click", async () => {
        try {
          await navigator.clipboard.writeText(pre.textContent);
          b.textContent = "Copied";
        } catch {
          b.textContent = "Select and copy by hand";
        }
        setTimeout(() => { b.textContent = "Copy"; }, 2000);
      });
      pre.before(b);
    });
  };
  copyButtons(conv);
  if (!window.EventSource) return;
  const atEnd = () => conv.scrollTop + conv.clientHeight >= conv.scrollHeight - 24;
  const follow = (change) => {
    const end = atEnd();
    change();
    copyButtons(conv);
    if (end) conv.scrollTop = conv.scrollHeight;
  };
  const parse = (e) => {
    const t = document.createElement("template");
    t.innerHTML = JSON.parse(e.data);
    return t.content;
  };
  const source = new EventSource(conv.dataset.follow);
  const status = document.getElementById("live-status");
  // The stream goes on from what the page shows (a reset replaces it).
  const live = () => {
    if (conv.dataset.live !== "1") conv.scrollTop = conv.scrollHeight;
    conv.dataset.live = "1";
    if (status) status.textContent = status.dataset.live;
  };
  source.addEventListener("open", live);
  source.addEventListener("reset", (e) => {
    follow(() => conv.replaceChildren(parse(e)));
    live();
    conv.scrollTop = conv.scrollHeight;
  });
  source.addEventListener("append", (e) => {
    follow(() => {
      for (const el of [...parse(e).children]) {
        const old = el.id && document.getElementById(el.id);
        if (!old) {
          conv.append(el);
          continue;
        }
        // A block the person opened stays open as it grows.
        if (old.open) el.open = true;
        old.replaceWith(el);
      }
    });
  });
  const activity = document.getElementById("activity");
  source.addEventListener("activity", (e) => {
    if (activity) activity.innerHTML = JSON.parse(e.data);
  });
  const record = document.getElementById("record");
  source.addEventListener("record", (e) => {
    if (!record) return;
    // What the person opened (the runs) stays open.
    const open = [...record.querySelectorAll("details[open][id]")].map((d) => d.id);
    record.innerHTML = JSON.parse(e.data);
    for (const id of open) document.getElementById(id)?.setAttribute("open", "");
  });
  source.addEventListener("problem", (e) => {
    source.close();
    if (status) status.textContent = "Not live: " + JSON.parse(e.data);
  });
})();
