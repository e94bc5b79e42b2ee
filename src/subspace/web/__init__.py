"""The web app: the sign-in page, the shell every view runs in, and its static assets."""
