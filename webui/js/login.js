// The login page's one behaviour, in a file: the Content-Security-Policy allows no inline script.
if (new URLSearchParams(location.search).has("error")) {
  document.getElementById("login-error").hidden = false;
}
