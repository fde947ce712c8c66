//! Fixed texts in the user's language: refusals and the answering instructions.

use cardinal_kb::Lang;

use crate::policy::RefusalReason;

/// A polite refusal that points to the care team, or to emergency services where apt.
pub fn refusal(lang: Lang, reason: RefusalReason) -> String {
    use RefusalReason::*;
    let (what, next) = match (lang, reason) {
        (Lang::En, DoubleDose) => ("I can't advise taking a double or extra dose.", "For a missed dose, follow your leaflet or ask the Redbird pharmacy (555-0150) or your care team (555-0142). If you already took too much and feel unwell, call the poison help line (555-0177) or 911."),
        (Lang::En, StopMedication) => ("I can't advise stopping, skipping or changing a prescribed medicine.", "Please talk to the person who prescribed it first; your care team is at 555-0142."),
        (Lang::En, Diagnosis) => ("I can't diagnose conditions, interpret results or promise that something will cure you.", "Your care team can review this with you: call 555-0142 or message them in the portal. If symptoms are severe or sudden, call 911."),
        (Lang::En, PromptInjection) => ("I can't change how I work or share my instructions.", "I can help with questions about Redbird Clinics services and general medicine-safety information."),
        (Lang::En, Privacy) => ("I can't share anyone's health information or accept passwords or ID numbers here.", "Caregivers can get access with the patient's signed consent form; your care team (555-0142) can help."),
        (Lang::En, Emergency) => ("This may be an emergency, and I can't handle emergencies.", "Please call 911 now."),
        (Lang::En, NoRelevantCard) | (Lang::En, NoAnswerInCards) | (Lang::En, AnswerGuard) => ("I don't have information about that.", "I can help with Redbird Clinics services and general medicine safety; for anything else about your health, contact your care team at 555-0142."),
        (Lang::Es419, DoubleDose) => ("No puedo aconsejarle tomar una dosis doble ni una dosis extra.", "Si olvidó una dosis, siga el prospecto o consulte a la farmacia Redbird (555-0150) o a su equipo de atención (555-0142). Si ya tomó de más y se siente mal, llame a la línea de intoxicaciones (555-0177) o al 911."),
        (Lang::Es419, StopMedication) => ("No puedo aconsejarle suspender, saltar ni cambiar un medicamento recetado.", "Hable primero con quien se lo recetó; su equipo de atención está en el 555-0142."),
        (Lang::Es419, Diagnosis) => ("No puedo dar diagnósticos, interpretar resultados ni prometer una cura.", "Su equipo de atención puede revisarlo con usted: llame al 555-0142 o escriba en el portal. Si los síntomas son graves o repentinos, llame al 911."),
        (Lang::Es419, PromptInjection) => ("No puedo cambiar mi forma de trabajar ni compartir mis instrucciones.", "Puedo ayudarle con preguntas sobre los servicios de Clínicas Redbird y sobre el uso seguro de medicamentos."),
        (Lang::Es419, Privacy) => ("No puedo compartir información de salud de otra persona ni recibir contraseñas o números de documento aquí.", "Un cuidador puede tener acceso con el formulario de consentimiento firmado por el paciente; su equipo de atención (555-0142) puede ayudarle."),
        (Lang::Es419, Emergency) => ("Esto puede ser una emergencia y no puedo atender emergencias.", "Llame al 911 ahora."),
        (Lang::Es419, NoRelevantCard) | (Lang::Es419, NoAnswerInCards) | (Lang::Es419, AnswerGuard) => ("No tengo información sobre eso.", "Puedo ayudarle con los servicios de Clínicas Redbird y el uso seguro de medicamentos; para otras dudas de salud, comuníquese con su equipo de atención al 555-0142."),
        (Lang::PtBr, DoubleDose) => ("Não posso orientar a tomar dose dobrada nem dose extra.", "Se você esqueceu uma dose, siga a bula ou fale com a farmácia Redbird (555-0150) ou com sua equipe de cuidado (555-0142). Se já tomou a mais e está passando mal, ligue para a linha de intoxicações (555-0177) ou para o SAMU 192."),
        (Lang::PtBr, StopMedication) => ("Não posso orientar a parar, pular ou mudar um remédio receitado.", "Converse antes com quem receitou; sua equipe de cuidado atende no 555-0142."),
        (Lang::PtBr, Diagnosis) => ("Não posso dar diagnósticos, interpretar resultados nem prometer cura.", "Sua equipe de cuidado pode ver isso com você: ligue 555-0142 ou mande mensagem pelo portal. Se os sintomas forem graves ou repentinos, ligue para o SAMU 192."),
        (Lang::PtBr, PromptInjection) => ("Não posso mudar meu funcionamento nem compartilhar minhas instruções.", "Posso ajudar com dúvidas sobre os serviços das Clínicas Redbird e o uso seguro de remédios."),
        (Lang::PtBr, Privacy) => ("Não posso compartilhar informações de saúde de outra pessoa nem receber senhas ou números de documento aqui.", "Um cuidador pode ter acesso com o termo de consentimento assinado pelo paciente; sua equipe de cuidado (555-0142) pode ajudar."),
        (Lang::PtBr, Emergency) => ("Isso pode ser uma emergência, e não consigo atender emergências.", "Ligue agora para o SAMU 192."),
        (Lang::PtBr, NoRelevantCard) | (Lang::PtBr, NoAnswerInCards) | (Lang::PtBr, AnswerGuard) => ("Não tenho informações sobre isso.", "Posso ajudar com os serviços das Clínicas Redbird e o uso seguro de remédios; para outras dúvidas de saúde, fale com sua equipe de cuidado no 555-0142."),
    };
    format!("{what} {next}")
}

/// The sentinel the model writes when the cards do not answer the question.
pub const NO_ANSWER: &str = "NO_ANSWER";

/// The system prompt: instructions in the user's language, then the numbered cards (full text,
/// rules included).
pub fn system_prompt(lang: Lang, cards: &[(&str, &str, &str)]) -> String {
    let instructions = match lang {
        Lang::En => "You are the patient-support assistant of Redbird Clinics. Answer the user's question in English, in 2 to 4 short sentences, using ONLY the facts in the cards below. After each sentence, cite the card it comes from as [card-id], exactly as the id is written. Obey every rule in each card's Rules section. Never advise doubling a dose or stopping a medicine, never diagnose, never promise a cure. If the cards do not answer the question, reply exactly NO_ANSWER.",
        Lang::Es419 => "Usted es el asistente de apoyo al paciente de Clínicas Redbird. Responda la pregunta en español, en 2 a 4 oraciones breves, usando SOLO los datos de las tarjetas de abajo. Después de cada oración, cite la tarjeta de donde sale como [id-de-tarjeta], escrito exactamente igual. Cumpla todas las reglas de la sección Reglas de cada tarjeta. Nunca aconseje duplicar una dosis ni suspender un medicamento, nunca dé diagnósticos, nunca prometa una cura. Si las tarjetas no responden la pregunta, responda exactamente NO_ANSWER.",
        Lang::PtBr => "Você é o assistente de apoio ao paciente das Clínicas Redbird. Responda à pergunta em português do Brasil, em 2 a 4 frases curtas, usando SÓ as informações dos cartões abaixo. Depois de cada frase, cite o cartão de onde ela vem como [id-do-cartão], escrito exatamente igual. Cumpra todas as regras da seção Regras de cada cartão. Nunca oriente dobrar a dose nem parar um remédio, nunca dê diagnóstico, nunca prometa cura. Se os cartões não respondem à pergunta, responda exatamente NO_ANSWER.",
    };
    let mut s = String::from(instructions);
    s.push_str("\n\n");
    for (i, (id, title, text)) in cards.iter().enumerate() {
        s.push_str(&format!("Card {} [{id}] {title}\n{text}\n\n", i + 1));
    }
    s.trim_end().to_string()
}

/// The user turn: the question, then a one-line format reminder with a concrete id to copy
/// (small models cite far more reliably when the format is restated right before they answer).
pub fn user_message(lang: Lang, question: &str, first_card: Option<&str>) -> String {
    let Some(id) = first_card else {
        return question.to_string();
    };
    let reminder = match lang {
        Lang::En => format!("(Answer in English; end each sentence with its card id in square brackets, like [{id}].)"),
        Lang::Es419 => format!("(Responda en español; termine cada oración con el id de su tarjeta entre corchetes, como [{id}].)"),
        Lang::PtBr => format!("(Responda em português; termine cada frase com o id do cartão entre colchetes, como [{id}].)"),
    };
    format!("{question}\n\n{reminder}")
}

/// Introduces the answer to the legitimate part of a message whose other part was declined.
pub fn rest_intro(lang: Lang) -> &'static str {
    match lang {
        Lang::En => "About the rest of your question:",
        Lang::Es419 => "Sobre el resto de su pregunta:",
        Lang::PtBr => "Sobre o resto da sua pergunta:",
    }
}

/// Remove the prompt's card labels a model copied into its answer ("Card 2 [id] …" → "[id] …"):
/// the number is the prompt's numbering, not a fact of the card, and must not reach the answer
/// (where the answer guard would rightly reject it as a number the card does not state).
pub(crate) fn strip_card_labels(answer: &str) -> String {
    let mut out = String::with_capacity(answer.len());
    let mut rest = answer;
    while let Some(i) = rest.find("Card ") {
        let (before, after) = rest.split_at(i);
        let tail = &after["Card ".len()..];
        let digits = tail.chars().take_while(|c| c.is_ascii_digit()).count();
        let at_boundary = before
            .chars()
            .last()
            .is_none_or(|c| c.is_whitespace() || c == '(' || c == '*');
        if at_boundary && digits > 0 && tail[digits..].starts_with(" [") {
            out.push_str(before);
            rest = &tail[digits + 1..];
        } else {
            out.push_str(before);
            out.push_str("Card ");
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod card_label_tests {
    use super::strip_card_labels;

    #[test]
    fn copied_card_labels_are_removed_and_nothing_else() {
        assert_eq!(
            strip_card_labels("Card 1 [travel.es-419] Viajar\n- Lleve 2 dosis."),
            "[travel.es-419] Viajar\n- Lleve 2 dosis."
        );
        assert_eq!(
            strip_card_labels("See it [a.en]. Card 12 [b.en] says so."),
            "See it [a.en]. [b.en] says so."
        );
        // Not a label: no bracket after the number, or inside a word.
        assert_eq!(strip_card_labels("Card 3 is lost."), "Card 3 is lost.");
        assert_eq!(
            strip_card_labels("Your ID-Card 5 [x.en]"),
            "Your ID-Card 5 [x.en]"
        );
        assert_eq!(strip_card_labels("Card [x.en]"), "Card [x.en]");
    }
}
