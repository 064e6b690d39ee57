// costgate dashboard: the only script, loaded from the gateway (CSP forbids inline scripts).
document.addEventListener("submit", (event) => {
  const message = event.target.getAttribute("data-confirm");
  if (message && !window.confirm(message)) event.preventDefault();
});
document.addEventListener("click", (event) => {
  const id = event.target.getAttribute && event.target.getAttribute("data-copy");
  if (!id) return;
  const text = document.getElementById(id).textContent;
  navigator.clipboard.writeText(text).then(() => { event.target.textContent = "Copied"; });
});
// A page answering a form post (a new key's secret) becomes a plain GET entry in the history:
// reloading it then shows the key list again instead of posting the form a second time.
if (document.querySelector("[data-posted]")) window.history.replaceState(null, "", window.location.href);
