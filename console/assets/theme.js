// Applies the stored theme before the page paints (no flash): "dark",
// "light", or the system's preference.
(function () {
  var t = localStorage.getItem("smartgo-theme");
  if (t !== "dark" && t !== "light") {
    t = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }
  document.documentElement.setAttribute("data-theme", t);
})();
