// Copy buttons: a button with data-copy="ID" copies the text (or value) of
// the element ID. Without script the buttons stay hidden; the text can be
// selected by hand.
document.querySelectorAll("button[data-copy]").forEach((b) => {
  const el = document.getElementById(b.dataset.copy);
  if (!el) return;
  b.hidden = false;
  const label = b.textContent;
  b.addEventListener("click", async () => {
    const text = el.value ?? el.textContent;
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // An insecure origin has no clipboard API: select, and copy.
      const range = document.createRange();
      range.selectNodeContents(el);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      if (el.select) el.select();
      document.execCommand("copy");
    }
    b.textContent = "Copied";
    setTimeout(() => { b.textContent = label; }, 2000);
  });
});
