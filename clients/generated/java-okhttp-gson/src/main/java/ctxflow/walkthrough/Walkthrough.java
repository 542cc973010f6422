package ctxflow.walkthrough;

import dev.ctxflow.okhttp.ApiClient;
import dev.ctxflow.okhttp.ApiException;
import dev.ctxflow.okhttp.api.AgentsApi;
import dev.ctxflow.okhttp.api.ContextApi;
import dev.ctxflow.okhttp.api.MessagesApi;
import dev.ctxflow.okhttp.api.SessionsApi;
import dev.ctxflow.okhttp.api.StepsApi;
import dev.ctxflow.okhttp.api.SubscriptionsApi;
import dev.ctxflow.okhttp.api.ToolCallsApi;
import dev.ctxflow.okhttp.model.AddContextRequest;
import dev.ctxflow.okhttp.model.AppendMessagesRequest;
import dev.ctxflow.okhttp.model.AppendMessagesRequestToolCallsInner;
import dev.ctxflow.okhttp.model.ConflictError;
import dev.ctxflow.okhttp.model.ConflictErrorBody;
import dev.ctxflow.okhttp.model.ContextItem;
import dev.ctxflow.okhttp.model.ContextRecorded;
import dev.ctxflow.okhttp.model.ContextRow;
import dev.ctxflow.okhttp.model.CreateAgentRequest;
import dev.ctxflow.okhttp.model.CreateAgentRequestContext;
import dev.ctxflow.okhttp.model.CreateSessionRequest;
import dev.ctxflow.okhttp.model.GateToolCallRequest;
import dev.ctxflow.okhttp.model.ListedMessage;
import dev.ctxflow.okhttp.model.MessageInput;
import dev.ctxflow.okhttp.model.MessagesAppended;
import dev.ctxflow.okhttp.model.NeutralStepAnswer;
import dev.ctxflow.okhttp.model.NotFoundError;
import dev.ctxflow.okhttp.model.NotFoundErrorBody;
import dev.ctxflow.okhttp.model.NoticeItem;
import dev.ctxflow.okhttp.model.OpenAIChatRequest;
import dev.ctxflow.okhttp.model.OpenAIChatStepAnswer;
import dev.ctxflow.okhttp.model.OpenAIChatToolRef;
import dev.ctxflow.okhttp.model.RewindRequest;
import dev.ctxflow.okhttp.model.RewindResult;
import dev.ctxflow.okhttp.model.StepAnswer;
import dev.ctxflow.okhttp.model.StepRequest;
import dev.ctxflow.okhttp.model.SubscriptionCreated;
import dev.ctxflow.okhttp.model.SubscriptionRequest;
import dev.ctxflow.okhttp.model.ToolDecision;
import dev.ctxflow.okhttp.model.ToolsItem;
import dev.ctxflow.okhttp.model.ToolDeclaration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The walkthrough on the okhttp-gson client generated from the served /openapi.json: every
 * answer read into its generated type. Usage: Walkthrough <server url> <api key> [configured source].
 * Prints one line per step and a last summary line; exits 1 with the first mismatch.
 */
public final class Walkthrough {
  private static final String CLIENT = "okhttp-gson";

  private Walkthrough() {}

  static void check(boolean ok, String what, Object seen) {
    if (!ok) throw new IllegalStateException(what + ": got " + seen);
  }

  /** A call that must be refused: its status, and its error body as the client's ApiException holds it. */
  interface Call {
    void run() throws ApiException;
  }

  static String refusal(Call call, int status) {
    try {
      call.run();
    } catch (ApiException e) {
      check(e.getCode() == status, "expected status " + status, e.getCode() + " " + e.getResponseBody());
      return e.getResponseBody();
    }
    throw new IllegalStateException("expected status " + status + ", the call succeeded");
  }

  /** A notice item, typed as the document's NoticeItem. */
  static ContextItem notice(String content) {
    return new ContextItem(new NoticeItem().kind(NoticeItem.KindEnum.NOTICE).content(content));
  }

  public static void main(String[] args) {
    if (args.length < 2) {
      System.err.println("usage: Walkthrough <server url> <api key> [configured source]");
      System.exit(2);
    }
    try {
      System.out.println(run(args[0], args[1], args.length > 2 ? args[2] : null));
    } catch (Exception e) {
      System.err.println("walkthrough " + CLIENT + " FAILED: " + e);
      System.exit(1);
    }
  }

  static String run(String url, String apiKey, String customSource) throws Exception {
    ApiClient client = new ApiClient().setBasePath(url);
    client.setBearerToken(apiKey);
    AgentsApi agents = new AgentsApi(client);
    SessionsApi sessions = new SessionsApi(client);
    ContextApi context = new ContextApi(client);
    StepsApi steps = new StepsApi(client);
    MessagesApi messages = new MessagesApi(client);
    ToolCallsApi toolCalls = new ToolCallsApi(client);
    SubscriptionsApi subscriptions = new SubscriptionsApi(client);

    String agentId = agents.createAgent(new CreateAgentRequest()
        .context(new CreateAgentRequestContext("You resolve support tickets."))
        .tools(List.of(new ToolDeclaration().name("lookup_ticket").description("Looks a ticket up"))))
        .getAgentId();
    check(agentId.startsWith("agt_"), "agentId", agentId);
    String sessionId = sessions.createSession(new CreateSessionRequest().agentId(agentId)).getSessionId();
    check(sessionId.startsWith("ses_"), "sessionId", sessionId);
    System.out.println("agent " + agentId + " session " + sessionId);

    MessagesAppended asked = messages.appendMessages(sessionId, new AppendMessagesRequest()
        .role(AppendMessagesRequest.RoleEnum.USER).content("Where is my refund?"));
    Long askedSeq = asked.getSeq();
    check(askedSeq != null && asked.getSeqs() == null, "one message: its seq", asked);

    List<ContextItem> items = List.of(notice("The customer is on the enterprise plan."));
    AddContextRequest plan = new AddContextRequest().sessionId(sessionId).key("plan-1").items(items);
    ContextRecorded first = context.addContext(plan);
    ContextRecorded replay = context.addContext(plan);
    check(first.getRecorded() == 1 && replay.getRecorded() == 0, "recorded 1, then 0 on the replay", first + " " + replay);
    String body = refusal(() -> context.addContext(new AddContextRequest().sessionId(sessionId).key("plan-1")
        .items(List.of(notice("Another plan."))) ), 409);
    ConflictErrorBody conflict = ConflictError.fromJson(body).getError();
    check(conflict.getCode() == ConflictErrorBody.CodeEnum.STATE_CONTEXT_KEY_CONFLICT, "409 code", conflict);
    check(Boolean.FALSE.equals(conflict.getRetryable()), "409 retryable", conflict);
    System.out.println("context recorded " + first.getRecorded() + " then " + replay.getRecorded()
        + ", conflict " + conflict.getCode().getValue());

    List<String> sources = new ArrayList<>(List.of("generic"));
    if (customSource != null) sources.add(customSource);
    for (String source : sources) {
      String ticket = source.equals("generic") ? "T-42" : "OPS-7";
      SubscriptionCreated made = subscriptions.subscribe(sessionId, new SubscriptionRequest().source(source).ticket(ticket));
      check(made.getCreated() && made.getSubscription().getSource().equals(source)
          && made.getSubscription().getTicket().equals(ticket), source, made);
    }
    int listed = subscriptions.listSubscriptions(sessionId).getSubscriptions().size();
    check(listed == sources.size(), "subscriptions", listed);
    System.out.println("subscribed " + String.join("+", sources));

    StepAnswer answer = steps.runStep(sessionId, new StepRequest());
    check(answer.getActualInstance() instanceof NeutralStepAnswer, "neutral step", answer.getActualInstance());
    NeutralStepAnswer neutral = answer.getNeutralStepAnswer();
    List<ContextRow> rows = neutral.getRows();
    check(rows.size() == 1 && rows.get(0).getKind() == ContextRow.KindEnum.NOTICE, "neutral rows", rows);
    check(neutral.getRequest().getActiveTools().equals(List.of("lookup_ticket", "__finish__")), "activeTools",
        neutral.getRequest().getActiveTools());
    check("auto".equals(neutral.getRequest().getToolChoice().getActualInstance()), "toolChoice",
        neutral.getRequest().getToolChoice());
    check(neutral.getCursor() == null, "cursor", neutral.getCursor());
    StepAnswer chatAnswer = steps.runStep(sessionId, new StepRequest().format(StepRequest.FormatEnum.OPENAI_CHAT));
    check(chatAnswer.getActualInstance() instanceof OpenAIChatStepAnswer, "openai-chat step", chatAnswer.getActualInstance());
    OpenAIChatStepAnswer chat = chatAnswer.getOpenAIChatStepAnswer();
    OpenAIChatRequest chatRequest = chat.getRequest();
    check(Objects.equals(chatRequest.getPromptCacheKey(), neutral.getCache().getKey()), "prompt_cache_key", chatRequest);
    List<String> allowed = chatRequest.getToolChoice().getOpenAIChatToolChoice().getAllowedTools().getTools().stream()
        .map(OpenAIChatToolRef::getFunction).map(f -> f.getName()).toList();
    check(allowed.equals(List.of("lookup_ticket", "__finish__")), "tool_choice.allowed_tools", chatRequest.getToolChoice());
    System.out.println("steps " + neutral.getFormat().getValue() + " " + rows.size() + " row, "
        + chat.getFormat().getValue() + " cache key kept");

    MessagesAppended turn = messages.appendMessages(sessionId, new AppendMessagesRequest().messages(List.of(
        new MessageInput().role(MessageInput.RoleEnum.ASSISTANT).content("").toolCalls(List.of(
            new AppendMessagesRequestToolCallsInner().callId("call-1").name("lookup_ticket").arguments("{\"ticket\":\"T-42\"}"))),
        new MessageInput().role(MessageInput.RoleEnum.TOOL).callId("call-1").content("T-42 is open"))));
    List<Long> seqs = turn.getSeqs();
    check(seqs != null && seqs.size() == 2 && seqs.get(0) > askedSeq && seqs.get(1) == seqs.get(0) + 1
        && turn.getSeq() == null, "two seqs, in order, after the question", turn);
    System.out.println("turn seqs " + seqs.size());

    ContextRecorded off = context.addContext(new AddContextRequest().sessionId(sessionId)
        .items(List.of(new ContextItem(
            new ToolsItem().kind(ToolsItem.KindEnum.TOOLS).disable(List.of("lookup_ticket"))))));
    check(off.getRecorded() == 1, "tools item recorded", off);
    NeutralStepAnswer switched = steps.runStep(sessionId, new StepRequest()).getNeutralStepAnswer();
    check(switched.getRequest().getActiveTools().equals(List.of("__finish__")), "activeTools after the switch",
        switched.getRequest().getActiveTools());
    ToolDecision inactive = toolCalls.gateToolCall(sessionId, new GateToolCallRequest().callId("call-2").name("lookup_ticket"));
    check(!inactive.getExecute() && inactive.getReason() == ToolDecision.ReasonEnum.TOOL_INACTIVE, "inactive tool", inactive);
    ToolDecision unknown = toolCalls.gateToolCall(sessionId, new GateToolCallRequest().callId("call-3").name("no_such_tool"));
    check(!unknown.getExecute() && unknown.getReason() == ToolDecision.ReasonEnum.TOOL_UNAVAILABLE, "unknown tool", unknown);
    System.out.println("gate " + inactive.getReason().getValue() + " " + unknown.getReason().getValue());

    RewindResult rewound = sessions.rewindSession(sessionId, new RewindRequest().toStepId(neutral.getStepId()));
    check(rewound.getRequeued() == 1 && rewound.getCursor() == null, "rewind", rewound);
    check(rewound.getActiveTools().equals(List.of("lookup_ticket", "__finish__")), "activeTools after the rewind", rewound);
    List<ListedMessage> kept = messages.listMessages(sessionId).getMessages();
    check(kept.size() == 1 && kept.get(0).getRole() == ListedMessage.RoleEnum.USER
        && kept.get(0).getSeq().equals(askedSeq), "messages after the rewind", kept);
    System.out.println("rewind requeued " + rewound.getRequeued() + ", messages " + kept.size());

    int erased = sessions.deleteSessionWithHttpInfo(sessionId).getStatusCode();
    check(erased == 204, "erase status", erased);
    NotFoundErrorBody gone = NotFoundError.fromJson(refusal(() -> sessions.getSession(sessionId), 404)).getError();
    check(gone.getCode() == NotFoundErrorBody.CodeEnum.STATE_SESSION_NOT_FOUND, "404 code", gone);
    System.out.println("erased " + erased + ", then " + gone.getCode().getValue());
    return "walkthrough " + CLIENT + " ok: session " + sessionId;
  }
}
