// A sign-in link fills the form with its code: send it at once. A program that only fetches
// the link (a chat's preview, a mail scanner) runs no script, so it cannot spend the code.
const form = document.querySelector("form[data-send-now]");
if (form) form.requestSubmit();
