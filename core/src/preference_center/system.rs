//! The pages Engage shows itself around a preference center's own: a bad or expired
//! link, a page that is not published, a form that could not be saved, too many
//! submissions, and the short page a saved form's redirect carries. Small, readable
//! on a phone, nothing loaded from elsewhere, and in the page's language:
//!
//! - the language of the center's page (`<html lang="…">` in its HTML) when the
//!   center is known and names one Engage has words for;
//! - else the reader's browser's choice (`Accept-Language`);
//! - else English.

use super::liquid::escape_html;

/// The languages system pages are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    En,
    De,
    Fr,
    Es,
    It,
    Nl,
    Pt,
}

impl Lang {
    /// A language from a tag (`de`, `de-AT`, `PT_br`: the primary subtag decides).
    pub fn from_tag(tag: &str) -> Option<Lang> {
        let primary = tag.trim().split(['-', '_']).next()?.to_ascii_lowercase();
        Some(match primary.as_str() {
            "en" => Lang::En,
            "de" => Lang::De,
            "fr" => Lang::Fr,
            "es" => Lang::Es,
            "it" => Lang::It,
            "nl" => Lang::Nl,
            "pt" => Lang::Pt,
            _ => return None,
        })
    }

    /// The tag for `<html lang>`.
    pub fn tag(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::De => "de",
            Lang::Fr => "fr",
            Lang::Es => "es",
            Lang::It => "it",
            Lang::Nl => "nl",
            Lang::Pt => "pt",
        }
    }

    /// The language an `Accept-Language` header prefers among these (highest `q`
    /// first, the header's order among equals; `q=0` means "not this one").
    pub fn from_accept(header: &str) -> Option<Lang> {
        let mut choices: Vec<(u16, usize, Lang)> = header
            .split(',')
            .enumerate()
            .filter_map(|(at, item)| {
                let mut parts = item.split(';');
                let lang = Lang::from_tag(parts.next()?)?;
                let q = parts.find_map(|p| p.trim().strip_prefix("q=")).map_or(Some(1000), |q| {
                    q.trim().parse::<f32>().ok().map(|q| (q.clamp(0.0, 1.0) * 1000.0) as u16)
                })?;
                (q > 0).then_some((q, at, lang))
            })
            .collect();
        choices.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        choices.first().map(|c| c.2)
    }

    /// The language an HTML page declares on its `<html>` tag, if Engage has words
    /// for it.
    pub fn of_html(html: &str) -> Option<Lang> {
        // The tag is at the top: a long page is not searched whole.
        let lower = html[..html.floor_char_boundary(4096)].to_ascii_lowercase();
        let start = lower.find("<html")?;
        let tag = &lower[start + 5..start + 5 + lower[start + 5..].find('>')?];
        // ` lang=` as an attribute of its own (not `xml:lang`'s tail, nor `data-lang`).
        let at = tag.match_indices("lang").find(|(i, _)| tag[..*i].ends_with(char::is_whitespace))?.0;
        let rest = tag[at + 4..].trim_start().strip_prefix('=')?.trim_start();
        let value = match rest.chars().next()? {
            q @ ('"' | '\'') => rest[1..].split(q).next()?,
            _ => rest.split(|c: char| c.is_whitespace() || c == '/').next()?,
        };
        Lang::from_tag(value)
    }
}

/// What a system page says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// The link was tampered with, or was never made here (403).
    InvalidLink,
    /// The link is past its expiry (403).
    ExpiredLink,
    /// No such center, or a draft (404).
    NotPublished,
    /// The user the link is for was deleted (404).
    UserGone,
    /// The center's stored page cannot be shown (404).
    CannotShow,
    /// The form was not sent as a form (415).
    NotAForm,
    /// The form's fields could not be read (400).
    BadForm,
    /// Over the submission limit (429).
    TooMany,
    /// Anything else: try again (5xx).
    TryLater,
}

/// A message's title and explanation.
fn words(m: Message, lang: Lang) -> (&'static str, &'static str) {
    use Lang::*;
    use Message::*;
    match (m, lang) {
        (InvalidLink, En) => ("This link is not valid", "Please use the link from your latest email."),
        (InvalidLink, De) => ("Dieser Link ist ungültig", "Bitte verwenden Sie den Link aus Ihrer neuesten E-Mail."),
        (InvalidLink, Fr) => ("Ce lien n’est pas valide", "Veuillez utiliser le lien de votre dernier e-mail."),
        (InvalidLink, Es) => ("Este enlace no es válido", "Utilice el enlace de su último correo electrónico."),
        (InvalidLink, It) => ("Questo link non è valido", "Usa il link della tua email più recente."),
        (InvalidLink, Nl) => ("Deze link is ongeldig", "Gebruik de link uit uw meest recente e-mail."),
        (InvalidLink, Pt) => ("Este link não é válido", "Use o link do seu e-mail mais recente."),
        (ExpiredLink, En) => ("This link has expired", "Please use the link from your latest email."),
        (ExpiredLink, De) => ("Dieser Link ist abgelaufen", "Bitte verwenden Sie den Link aus Ihrer neuesten E-Mail."),
        (ExpiredLink, Fr) => ("Ce lien a expiré", "Veuillez utiliser le lien de votre dernier e-mail."),
        (ExpiredLink, Es) => ("Este enlace ha caducado", "Utilice el enlace de su último correo electrónico."),
        (ExpiredLink, It) => ("Questo link è scaduto", "Usa il link della tua email più recente."),
        (ExpiredLink, Nl) => ("Deze link is verlopen", "Gebruik de link uit uw meest recente e-mail."),
        (ExpiredLink, Pt) => ("Este link expirou", "Use o link do seu e-mail mais recente."),
        (NotPublished, En) => ("This page is not available", "This preference center does not exist or is not published."),
        (NotPublished, De) => ("Diese Seite ist nicht verfügbar", "Diese Einstellungsseite gibt es nicht oder sie ist nicht veröffentlicht."),
        (NotPublished, Fr) => ("Cette page n’est pas disponible", "Ce centre de préférences n’existe pas ou n’est pas publié."),
        (NotPublished, Es) => ("Esta página no está disponible", "Este centro de preferencias no existe o no está publicado."),
        (NotPublished, It) => ("Questa pagina non è disponibile", "Questo centro preferenze non esiste o non è pubblicato."),
        (NotPublished, Nl) => ("Deze pagina is niet beschikbaar", "Dit voorkeurencentrum bestaat niet of is niet gepubliceerd."),
        (NotPublished, Pt) => ("Esta página não está disponível", "Esta central de preferências não existe ou não está publicada."),
        (UserGone, En) => ("This page is not available", "This user no longer exists."),
        (UserGone, De) => ("Diese Seite ist nicht verfügbar", "Dieses Konto gibt es nicht mehr."),
        (UserGone, Fr) => ("Cette page n’est pas disponible", "Cet utilisateur n’existe plus."),
        (UserGone, Es) => ("Esta página no está disponible", "Este usuario ya no existe."),
        (UserGone, It) => ("Questa pagina non è disponibile", "Questo utente non esiste più."),
        (UserGone, Nl) => ("Deze pagina is niet beschikbaar", "Deze gebruiker bestaat niet meer."),
        (UserGone, Pt) => ("Esta página não está disponível", "Este usuário não existe mais."),
        (CannotShow, En) => ("This page is not available", "This page cannot be shown right now."),
        (CannotShow, De) => ("Diese Seite ist nicht verfügbar", "Diese Seite kann gerade nicht angezeigt werden."),
        (CannotShow, Fr) => ("Cette page n’est pas disponible", "Cette page ne peut pas être affichée pour le moment."),
        (CannotShow, Es) => ("Esta página no está disponible", "Esta página no se puede mostrar en este momento."),
        (CannotShow, It) => ("Questa pagina non è disponibile", "Questa pagina non può essere mostrata al momento."),
        (CannotShow, Nl) => ("Deze pagina is niet beschikbaar", "Deze pagina kan nu niet worden weergegeven."),
        (CannotShow, Pt) => ("Esta página não está disponível", "Esta página não pode ser exibida agora."),
        (NotAForm, En) => ("The form could not be saved", "Please send the form from the page itself."),
        (NotAForm, De) => ("Das Formular konnte nicht gespeichert werden", "Bitte senden Sie das Formular von der Seite selbst."),
        (NotAForm, Fr) => ("Le formulaire n’a pas pu être enregistré", "Veuillez envoyer le formulaire depuis la page elle-même."),
        (NotAForm, Es) => ("No se pudo guardar el formulario", "Envíe el formulario desde la propia página."),
        (NotAForm, It) => ("Non è stato possibile salvare il modulo", "Invia il modulo dalla pagina stessa."),
        (NotAForm, Nl) => ("Het formulier kon niet worden opgeslagen", "Verstuur het formulier vanaf de pagina zelf."),
        (NotAForm, Pt) => ("Não foi possível salvar o formulário", "Envie o formulário a partir da própria página."),
        (BadForm, En) => ("The form could not be saved", "Some of your choices could not be read. Please reload the page and try again."),
        (BadForm, De) => ("Das Formular konnte nicht gespeichert werden", "Einige Ihrer Angaben konnten nicht gelesen werden. Bitte laden Sie die Seite neu und versuchen Sie es noch einmal."),
        (BadForm, Fr) => ("Le formulaire n’a pas pu être enregistré", "Certains de vos choix n’ont pas pu être lus. Veuillez recharger la page et réessayer."),
        (BadForm, Es) => ("No se pudo guardar el formulario", "No se pudieron leer algunas de sus opciones. Vuelva a cargar la página e inténtelo de nuevo."),
        (BadForm, It) => ("Non è stato possibile salvare il modulo", "Alcune delle tue scelte non sono leggibili. Ricarica la pagina e riprova."),
        (BadForm, Nl) => ("Het formulier kon niet worden opgeslagen", "Sommige van uw keuzes konden niet worden gelezen. Laad de pagina opnieuw en probeer het nog eens."),
        (BadForm, Pt) => ("Não foi possível salvar o formulário", "Algumas das suas escolhas não puderam ser lidas. Recarregue a página e tente novamente."),
        (TooMany, En) => ("Too many submissions", "Please wait a minute and try again."),
        (TooMany, De) => ("Zu viele Anfragen", "Bitte warten Sie eine Minute und versuchen Sie es dann noch einmal."),
        (TooMany, Fr) => ("Trop d’envois", "Veuillez patienter une minute et réessayer."),
        (TooMany, Es) => ("Demasiados envíos", "Espere un minuto e inténtelo de nuevo."),
        (TooMany, It) => ("Troppi invii", "Attendi un minuto e riprova."),
        (TooMany, Nl) => ("Te veel verzoeken", "Wacht een minuut en probeer het opnieuw."),
        (TooMany, Pt) => ("Envios demais", "Aguarde um minuto e tente novamente."),
        (TryLater, En) => ("This page is not available", "Please try again in a moment."),
        (TryLater, De) => ("Diese Seite ist nicht verfügbar", "Bitte versuchen Sie es gleich noch einmal."),
        (TryLater, Fr) => ("Cette page n’est pas disponible", "Veuillez réessayer dans un instant."),
        (TryLater, Es) => ("Esta página no está disponible", "Inténtelo de nuevo en un momento."),
        (TryLater, It) => ("Questa pagina non è disponibile", "Riprova tra un momento."),
        (TryLater, Nl) => ("Deze pagina is niet beschikbaar", "Probeer het zo meteen opnieuw."),
        (TryLater, Pt) => ("Esta página não está disponível", "Tente novamente em instantes."),
    }
}

/// The words around a message: the link back to the form, and the saved page's.
fn back_words(lang: Lang) -> &'static str {
    match lang {
        Lang::En => "Back to your preferences",
        Lang::De => "Zurück zu Ihren Einstellungen",
        Lang::Fr => "Retour à vos préférences",
        Lang::Es => "Volver a sus preferencias",
        Lang::It => "Torna alle tue preferenze",
        Lang::Nl => "Terug naar uw voorkeuren",
        Lang::Pt => "Voltar às suas preferências",
    }
}

fn saved_words(lang: Lang) -> (&'static str, &'static str, &'static str) {
    match lang {
        Lang::En => ("Saved", "Your preferences are saved.", "Continue"),
        Lang::De => ("Gespeichert", "Ihre Einstellungen sind gespeichert.", "Weiter"),
        Lang::Fr => ("Enregistré", "Vos préférences sont enregistrées.", "Continuer"),
        Lang::Es => ("Guardado", "Sus preferencias se han guardado.", "Continuar"),
        Lang::It => ("Salvato", "Le tue preferenze sono state salvate.", "Continua"),
        Lang::Nl => ("Opgeslagen", "Uw voorkeuren zijn opgeslagen.", "Verder"),
        Lang::Pt => ("Salvo", "Suas preferências foram salvas.", "Continuar"),
    }
}

/// The look of system pages: readable on a phone, nothing loaded from elsewhere.
const STYLE: &str = "body{margin:0;font:17px/1.5 system-ui,-apple-system,'Segoe UI',sans-serif;color:#1f2328;\
background:#f6f8fa}main{max-width:32rem;margin:12vh auto 0;padding:1.5rem;background:#fff;\
border:1px solid #d0d7de;border-radius:8px}h1{font-size:1.35rem;margin:0 0 .5rem}p{margin:.5rem 0}a{color:#0969da}";

fn document(lang: Lang, title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"{l}\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{t}</title>\
         <style>{STYLE}</style></head><body><main><h1>{t}</h1>{body}</main></body></html>",
        l = lang.tag(),
        t = escape_html(title),
    )
}

/// A system page for `message`, with a way back to the form at `back` when given.
pub fn message_page(message: Message, lang: Lang, back: Option<&str>) -> String {
    let (title, detail) = words(message, lang);
    let back = back
        .map(|url| format!(r#"<p><a href="{}">{}</a></p>"#, escape_html(url), back_words(lang)))
        .unwrap_or_default();
    document(lang, title, &format!("<p>{}</p>{back}", escape_html(detail)))
}

/// The page a saved form's `303` carries (for clients that do not follow it).
pub fn saved_page(lang: Lang, location: &str) -> String {
    let (title, text, go) = saved_words(lang);
    document(lang, title, &format!(r#"<p>{text} <a href="{}">{go}</a>.</p>"#, escape_html(location)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_declares_its_language_on_its_html_tag() {
        assert_eq!(Lang::of_html("<!doctype html><HTML LANG=\"de-AT\"><body>"), Some(Lang::De));
        assert_eq!(Lang::of_html("<html class=x lang='fr'>"), Some(Lang::Fr));
        assert_eq!(Lang::of_html("<html lang=es>"), Some(Lang::Es));
        assert_eq!(Lang::of_html("<html lang = \"pt_BR\" >"), Some(Lang::Pt));
        // Not an attribute of its own, a language without words, or none at all.
        assert_eq!(Lang::of_html("<html data-lang=\"de\">"), None);
        assert_eq!(Lang::of_html("<html xml:lang=\"de\">"), None);
        assert_eq!(Lang::of_html("<html lang=\"ja\">"), None);
        assert_eq!(Lang::of_html("<body lang=\"de\">"), None);
        assert_eq!(Lang::of_html("<html lang"), None);
        assert_eq!(Lang::of_html("<html lang=>"), None);
        assert_eq!(Lang::of_html("é<html lang=it>"), Some(Lang::It));
    }

    #[test]
    fn the_browser_s_choice_follows_its_weights() {
        assert_eq!(Lang::from_accept("de-DE,de;q=0.9,en;q=0.8"), Some(Lang::De));
        assert_eq!(Lang::from_accept("ja, fr;q=0.5, nl;q=0.7"), Some(Lang::Nl));
        assert_eq!(Lang::from_accept("en;q=0.5, it"), Some(Lang::It));
        assert_eq!(Lang::from_accept("fr;q=0, es;q=0.1"), Some(Lang::Es));
        assert_eq!(Lang::from_accept("*"), None);
        assert_eq!(Lang::from_accept("de;q=x"), None);
        assert_eq!(Lang::from_accept(""), None);
    }

    #[test]
    fn every_message_has_words_in_every_language_and_pages_escape_the_link() {
        let all = [Lang::En, Lang::De, Lang::Fr, Lang::Es, Lang::It, Lang::Nl, Lang::Pt];
        let messages = [
            Message::InvalidLink,
            Message::ExpiredLink,
            Message::NotPublished,
            Message::UserGone,
            Message::CannotShow,
            Message::NotAForm,
            Message::BadForm,
            Message::TooMany,
            Message::TryLater,
        ];
        for lang in all {
            for m in messages {
                let (title, detail) = words(m, lang);
                assert!(!title.is_empty() && !detail.is_empty());
                if lang != Lang::En {
                    assert_ne!(words(m, Lang::En).1, detail, "{m:?} in {lang:?}");
                }
            }
            let page = message_page(Message::BadForm, lang, Some("/preferences/a\"b"));
            assert!(page.contains(&format!("<html lang=\"{}\">", lang.tag())));
            assert!(page.contains("name=\"viewport\""));
            assert!(page.contains("href=\"/preferences/a&quot;b\""));
        }
    }
}
