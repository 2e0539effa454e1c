// Refreshes the first page of the sessions list: every few seconds, while
// the tab is visible and the person is not working in the list (focus in
// it), it asks for the list alone (/sessions/rows, with the page's
// filters) and puts it in place when it changed (its ETag is the list's
// version). Without script, the page's Refresh link does it.
(() => {
  const list = document.querySelector("#session-list[data-refresh]");
  if (!list) return;
  const every = 5000;
  let timer = 0;
  const schedule = () => {
    clearTimeout(timer);
    if (document.visibilityState === "visible") timer = setTimeout(refresh, every);
  };
  const refresh = async () => {
    if (list.contains(document.activeElement)) return schedule();
    try {
      const res = await fetch(list.dataset.refresh, {
        cache: "no-store",
        headers: { "If-None-Match": '"' + list.dataset.version + '"' },
      });
      if (res.status === 200 && !res.redirected) {
        const html = await res.text();
        if (!list.contains(document.activeElement)) {
          list.innerHTML = html;
          list.dataset.version = (res.headers.get("ETag") || "").replaceAll('"', "");
        }
      } else if (res.status !== 304) {
        // Signed out meanwhile (a redirect to sign in) or a failure: stop;
        // the Refresh link says what is wrong.
        return;
      }
    } catch {
      // The server is unreachable for now: try again later.
    }
    schedule();
  };
  document.addEventListener("visibilitychange", schedule);
  schedule();
})();
