//! Hiding database passwords from every message: a `--db` value, or any
//! text that may quote one (an error of the PostgreSQL client, a log
//! line). One helper, so that no message shows a password another hides.

/// What replaces a password.
const HIDDEN: &str = "***";

/// `text` with every password hidden:
/// - the password of each URL's user info: `postgres://user:secret@host/db`
///   becomes `postgres://user:***@host/db` (everything from the first `:`
///   of the user info to its last `@`, so that a password holding `/`,
///   `?` or `@` is hidden whole);
/// - the value of every `password=` and `sslpassword=`, as a URL's query
///   parameter (`?password=secret&...`) or a key=value connection string's
///   keyword (`host=db password='a b'`; the key in any case, spaces around
///   `=` allowed, a quoted value up to its closing quote).
///
/// It errs on the side of hiding: a URL with an `@` in its query may lose
/// more than its password.
pub fn redact_passwords(text: &str) -> String {
    redact_parameters(&redact_user_info(text))
}

/// Hides the password of each `scheme://user:password@...` in `text`.
fn redact_user_info(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        // The URL runs to the first character that cannot be in one here.
        let end = after
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>'))
            .unwrap_or(after.len());
        let (url, tail) = after.split_at(end);
        match url.rfind('@').map(|at| url.split_at(at)) {
            Some((user_info, host)) if user_info.contains(':') => {
                let user = &user_info[..user_info.find(':').unwrap_or(0)];
                out.push_str(user);
                out.push(':');
                out.push_str(HIDDEN);
                out.push_str(host);
            }
            _ => out.push_str(url),
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// Hides the value of every `password=` (and `sslpassword=`) in `text`.
fn redact_parameters(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut from = 0;
    while let Some(found) = lower[from..].find("password") {
        let key_end = from + found + "password".len();
        from = key_end;
        let after_key = &text[key_end..];
        let spaces = after_key.len() - after_key.trim_start_matches(' ').len();
        if !after_key[spaces..].starts_with('=') {
            continue;
        }
        let value_start = key_end + spaces + 1;
        let after_eq = &text[value_start..];
        let blanks = after_eq.len() - after_eq.trim_start_matches(' ').len();
        let value_start = value_start + blanks;
        let value = &text[value_start..];
        // Hidden already (a message quoting a redacted URL): as it is, so
        // that what follows it stays.
        if value.starts_with(HIDDEN) {
            continue;
        }
        let value_len = if let Some(quoted) = value.strip_prefix('\'') {
            // libpq's quoting: `\'` and `\\` inside, up to the closing quote.
            let mut escaped = false;
            let close = quoted.char_indices().find(|&(_, c)| {
                let closes = c == '\'' && !escaped;
                escaped = c == '\\' && !escaped;
                closes
            });
            close.map_or(value.len(), |(i, _)| i + 2)
        } else {
            value
                .find(|c: char| c.is_whitespace() || matches!(c, '&' | '#' | '"' | '`'))
                .unwrap_or(value.len())
        };
        if value_len == 0 {
            continue;
        }
        out.push_str(&text[copied..value_start]);
        out.push_str(HIDDEN);
        copied = value_start + value_len;
        from = copied;
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::redact_passwords;

    #[test]
    fn user_info_passwords_are_hidden_whole() {
        let cases = [
            (
                "postgres://edge:s3cret@db:5432/fleet?sslmode=require",
                "postgres://edge:***@db:5432/fleet?sslmode=require",
            ),
            // A `/` in the password: the user info ends at the last `@`.
            (
                "postgres://postgres:S3cret/PW@127.0.0.1:1/edge",
                "postgres://postgres:***@127.0.0.1:1/edge",
            ),
            ("postgresql://u:p?a@ss@h/d", "postgresql://u:***@h/d"),
            ("postgres://edge@db/f", "postgres://edge@db/f"),
            ("postgres://db:5432/f", "postgres://db:5432/f"),
            ("/var/lib/edge.db", "/var/lib/edge.db"),
            (
                "cannot connect to database postgres://a:b@h/d: refused",
                "cannot connect to database postgres://a:***@h/d: refused",
            ),
        ];
        for (text, shown) in cases {
            assert_eq!(redact_passwords(text), shown, "{text}");
        }
    }

    #[test]
    fn password_parameters_are_hidden() {
        let cases = [
            (
                "postgres://edge@db/f?password=S3cret&sslmode=require",
                "postgres://edge@db/f?password=***&sslmode=require",
            ),
            (
                "postgres://edge@db/f?sslmode=prefer&PASSWORD=S3cret",
                "postgres://edge@db/f?sslmode=prefer&PASSWORD=***",
            ),
            (
                "host=db password = 'a b\\' c' dbname=edge",
                "host=db password = *** dbname=edge",
            ),
            (
                "host=db sslpassword=k3y password=S3cret",
                "host=db sslpassword=*** password=***",
            ),
            ("the password is wrong", "the password is wrong"),
            ("password=", "password="),
            // Redacting twice changes nothing.
            (
                "database postgres://u@h/d?password=***: refused",
                "database postgres://u@h/d?password=***: refused",
            ),
        ];
        for (text, shown) in cases {
            assert_eq!(redact_passwords(text), shown, "{text}");
        }
    }
}
