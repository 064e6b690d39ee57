
CREATE TABLE public.api_keys (
    id character varying(40) NOT NULL,
    team_id character varying(40) NOT NULL,
    name character varying(200),
    key_hash character varying(64) NOT NULL,
    key_prefix character varying(16) NOT NULL,
    models text,
    plan character varying(20) NOT NULL,
    tags text,
    expires_at double precision,
    revoked_at double precision,
    created_at double precision NOT NULL
);

CREATE TABLE public.batch_results (
    batch_id character varying(64) NOT NULL,
    line integer NOT NULL,
    custom_id character varying(512) NOT NULL,
    request_id character varying(64) NOT NULL,
    status_code integer NOT NULL,
    body text NOT NULL,
    prompt_tokens integer NOT NULL,
    completion_tokens integer NOT NULL,
    cached_tokens integer NOT NULL,
    cost_pusd bigint NOT NULL,
    created_at double precision NOT NULL
);

CREATE TABLE public.batches (
    id character varying(64) NOT NULL,
    team_id character varying(40) NOT NULL,
    key_id character varying(40) NOT NULL,
    endpoint character varying(64) NOT NULL,
    input_file_id character varying(64) NOT NULL,
    completion_window character varying(16) NOT NULL,
    status character varying(16) NOT NULL,
    total integer NOT NULL,
    metadata text,
    errors text,
    output_file_id character varying(64),
    error_file_id character varying(64),
    created_at double precision NOT NULL,
    expires_at double precision NOT NULL,
    in_progress_at double precision,
    finalizing_at double precision,
    completed_at double precision,
    failed_at double precision,
    expired_at double precision,
    cancelling_at double precision,
    cancelled_at double precision,
    lease_owner character varying(40),
    lease_until double precision
);

CREATE TABLE public.budgets (
    id character varying(40) NOT NULL,
    scope character varying(8) NOT NULL,
    subject character varying(200) NOT NULL,
    period character varying(8) NOT NULL,
    amount_pusd bigint NOT NULL,
    alert_at text NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL
);

CREATE TABLE public.cascade_samples (
    id integer NOT NULL,
    cascade character varying(200) NOT NULL,
    created_at double precision NOT NULL,
    request_id character varying(40),
    confidences text NOT NULL,
    agrees text NOT NULL,
    features text,
    feature_set text,
    texts text,
    weight double precision
);

CREATE SEQUENCE public.cascade_samples_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.cascade_samples_id_seq OWNED BY public.cascade_samples.id;

CREATE TABLE public.dashboard_sessions (
    id_hash character varying(64) NOT NULL,
    created_at double precision NOT NULL,
    expires_at double precision NOT NULL
);

CREATE TABLE public.distill_texts (
    id integer NOT NULL,
    cascade character varying(200) NOT NULL,
    source character varying(16) NOT NULL,
    request_id character varying(64) NOT NULL,
    team_id character varying(40) NOT NULL,
    team_name character varying(200) NOT NULL,
    served_model character varying(200) NOT NULL,
    created_at double precision NOT NULL,
    messages text NOT NULL,
    answer text NOT NULL
);

CREATE SEQUENCE public.distill_texts_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.distill_texts_id_seq OWNED BY public.distill_texts.id;

CREATE TABLE public.feedback (
    request_id character varying(40) NOT NULL,
    team_id character varying(40) NOT NULL,
    key_id character varying(40),
    reported_by character varying(40) NOT NULL,
    requested_model character varying(200),
    served_model character varying(200),
    cache_status character varying(16) NOT NULL,
    verdict character varying(8) NOT NULL,
    comment text,
    query text,
    stored text,
    requested_at double precision NOT NULL,
    updated_at double precision NOT NULL
);

CREATE TABLE public.files (
    id character varying(64) NOT NULL,
    team_id character varying(40) NOT NULL,
    key_id character varying(40),
    filename character varying(500) NOT NULL,
    purpose character varying(32) NOT NULL,
    bytes bigint NOT NULL,
    created_at double precision NOT NULL,
    expires_at double precision
);

CREATE TABLE public.ledger (
    request_id character varying(40) NOT NULL,
    created_at double precision NOT NULL,
    day character varying(10) NOT NULL,
    team_id character varying(40),
    key_id character varying(40),
    "user" character varying(200),
    tags text,
    trace_id character varying(200),
    endpoint character varying(32) NOT NULL,
    requested_model character varying(200),
    served_model character varying(200),
    provider character varying(32),
    prompt_tokens integer NOT NULL,
    completion_tokens integer NOT NULL,
    cached_tokens integer NOT NULL,
    cost_pusd bigint NOT NULL,
    saved_pusd bigint NOT NULL,
    latency_ms double precision NOT NULL,
    ttft_ms double precision,
    cache_status character varying(16) NOT NULL,
    status integer NOT NULL,
    error text
);

CREATE TABLE public.ledger_daily (
    day character varying(10) NOT NULL,
    team_id character varying(40) NOT NULL,
    requested_model character varying(200) NOT NULL,
    served_model character varying(200) NOT NULL,
    cache_status character varying(16) NOT NULL,
    requests integer NOT NULL,
    errors integer NOT NULL,
    prompt_tokens bigint NOT NULL,
    completion_tokens bigint NOT NULL,
    cost_pusd bigint NOT NULL,
    saved_pusd bigint NOT NULL
);

CREATE TABLE public.ledger_rollup (
    name character varying(40) NOT NULL,
    rolled_until double precision NOT NULL
);

CREATE TABLE public.stored_responses (
    id character varying(64) NOT NULL,
    team_id character varying(40) NOT NULL,
    previous_response_id character varying(64),
    created_at double precision NOT NULL,
    expires_at double precision NOT NULL,
    bytes integer NOT NULL,
    data text NOT NULL
);

CREATE TABLE public.teams (
    id character varying(40) NOT NULL,
    name character varying(200) NOT NULL,
    created_at double precision NOT NULL
);

ALTER TABLE ONLY public.cascade_samples ALTER COLUMN id SET DEFAULT nextval('public.cascade_samples_id_seq'::regclass);

ALTER TABLE ONLY public.distill_texts ALTER COLUMN id SET DEFAULT nextval('public.distill_texts_id_seq'::regclass);

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_key_hash_key UNIQUE (key_hash);

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.batch_results
    ADD CONSTRAINT batch_results_pkey PRIMARY KEY (batch_id, line);

ALTER TABLE ONLY public.batches
    ADD CONSTRAINT batches_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.budgets
    ADD CONSTRAINT budgets_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.cascade_samples
    ADD CONSTRAINT cascade_samples_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.dashboard_sessions
    ADD CONSTRAINT dashboard_sessions_pkey PRIMARY KEY (id_hash);

ALTER TABLE ONLY public.distill_texts
    ADD CONSTRAINT distill_texts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.feedback
    ADD CONSTRAINT feedback_pkey PRIMARY KEY (request_id);

ALTER TABLE ONLY public.files
    ADD CONSTRAINT files_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.ledger_daily
    ADD CONSTRAINT ledger_daily_pkey PRIMARY KEY (day, team_id, requested_model, served_model, cache_status);

ALTER TABLE ONLY public.ledger
    ADD CONSTRAINT ledger_pkey PRIMARY KEY (request_id);

ALTER TABLE ONLY public.ledger_rollup
    ADD CONSTRAINT ledger_rollup_pkey PRIMARY KEY (name);

ALTER TABLE ONLY public.stored_responses
    ADD CONSTRAINT stored_responses_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.teams
    ADD CONSTRAINT teams_name_key UNIQUE (name);

ALTER TABLE ONLY public.teams
    ADD CONSTRAINT teams_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.budgets
    ADD CONSTRAINT uq_budget_subject_period UNIQUE (scope, subject, period);

CREATE INDEX ix_api_keys_team_id ON public.api_keys USING btree (team_id);

CREATE INDEX ix_batches_status ON public.batches USING btree (status);

CREATE INDEX ix_batches_team_created ON public.batches USING btree (team_id, created_at);

CREATE INDEX ix_cascade_samples_cascade ON public.cascade_samples USING btree (cascade, id);

CREATE INDEX ix_dashboard_sessions_expires_at ON public.dashboard_sessions USING btree (expires_at);

CREATE INDEX ix_distill_texts_cascade ON public.distill_texts USING btree (cascade, id);

CREATE INDEX ix_feedback_model ON public.feedback USING btree (requested_model, requested_at);

CREATE INDEX ix_feedback_team ON public.feedback USING btree (team_id, requested_at);

CREATE INDEX ix_files_team_created ON public.files USING btree (team_id, created_at);

CREATE INDEX ix_ledger_created ON public.ledger USING btree (created_at);

CREATE INDEX ix_ledger_day ON public.ledger USING btree (day);

CREATE INDEX ix_ledger_key_day ON public.ledger USING btree (key_id, day);

CREATE INDEX ix_ledger_live ON public.ledger USING btree (created_at, day, team_id, requested_model, served_model, cache_status, status, prompt_tokens, completion_tokens, cost_pusd, saved_pusd);

CREATE INDEX ix_ledger_team_day ON public.ledger USING btree (team_id, day);

CREATE INDEX ix_ledger_trace ON public.ledger USING btree (trace_id);

CREATE INDEX ix_stored_responses_expires ON public.stored_responses USING btree (expires_at);

CREATE INDEX ix_stored_responses_team_created ON public.stored_responses USING btree (team_id, created_at);

