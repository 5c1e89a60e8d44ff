// A client-side router: the server answers every route with index.html
// (static's `try`), and this script draws the view for location.pathname.
function render() {
  var view = document.getElementById("view");
  var m = location.pathname.match(/^\/users\/(\d+)$/);
  view.textContent = m ? "user " + m[1] : location.pathname === "/" ? "home" : "no such page";
  document.title = "spa:" + view.textContent;
}
document.addEventListener("click", function (e) {
  var a = e.target.closest("a[data-route]");
  if (!a) return;
  e.preventDefault();
  history.pushState(null, "", a.getAttribute("href"));
  render();
});
window.addEventListener("popstate", render);
render();
