// Refreshes the first page of the sessions list: every few seconds, while
// the tab is visible and the person is not working in the list (focus in
// it), it fetches the list alone (/sessions/rows, with the page's filters)
// and puts it in place. Without script, the page's Refresh link does it.
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
      const res = await fetch(list.dataset.refresh, { credentials: "same-origin", cache: "no-store" });
      // Signed out meanwhile (a redirect to sign in) or a failure: stop;
      // the Refresh link says what is wrong.
      if (!res.ok || res.redirected) return;
      const html = await res.text();
      if (!list.contains(document.activeElement)) list.innerHTML = html;
      list.dataset.refreshed = String(Number(list.dataset.refreshed || 0) + 1);
    } catch {
      // The server is unreachable for now: try again later.
    }
    schedule();
  };
  document.addEventListener("visibilitychange", schedule);
  schedule();
})();
