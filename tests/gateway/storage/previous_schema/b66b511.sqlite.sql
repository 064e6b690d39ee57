CREATE TABLE teams (
	id VARCHAR(40) NOT NULL, 
	name VARCHAR(200) NOT NULL, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (name)
);
CREATE TABLE api_keys (
	id VARCHAR(40) NOT NULL, 
	team_id VARCHAR(40) NOT NULL, 
	name VARCHAR(200), 
	key_hash VARCHAR(64) NOT NULL, 
	key_prefix VARCHAR(16) NOT NULL, 
	models TEXT, 
	"plan" VARCHAR(20) NOT NULL, 
	tags TEXT, 
	expires_at FLOAT, 
	revoked_at FLOAT, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (key_hash)
);
CREATE INDEX ix_api_keys_team_id ON api_keys (team_id);
CREATE TABLE ledger (
	request_id VARCHAR(40) NOT NULL, 
	created_at FLOAT NOT NULL, 
	day VARCHAR(10) NOT NULL, 
	team_id VARCHAR(40), 
	key_id VARCHAR(40), 
	user VARCHAR(200), 
	tags TEXT, 
	trace_id VARCHAR(200), 
	endpoint VARCHAR(32) NOT NULL, 
	requested_model VARCHAR(200), 
	served_model VARCHAR(200), 
	provider VARCHAR(32), 
	prompt_tokens INTEGER NOT NULL, 
	completion_tokens INTEGER NOT NULL, 
	cached_tokens INTEGER NOT NULL, 
	cost_pusd BIGINT NOT NULL, 
	saved_pusd BIGINT NOT NULL, 
	latency_ms FLOAT NOT NULL, 
	ttft_ms FLOAT, 
	cache_status VARCHAR(16) NOT NULL, 
	status INTEGER NOT NULL, 
	error TEXT, 
	PRIMARY KEY (request_id)
);
CREATE INDEX ix_ledger_team_day ON ledger (team_id, day);
CREATE INDEX ix_ledger_day ON ledger (day);
CREATE INDEX ix_ledger_key_day ON ledger (key_id, day);
CREATE INDEX ix_ledger_trace ON ledger (trace_id);
CREATE INDEX ix_ledger_live ON ledger (created_at, day, team_id, requested_model, served_model, cache_status, status, prompt_tokens, completion_tokens, cost_pusd, saved_pusd);
CREATE INDEX ix_ledger_created ON ledger (created_at);
CREATE TABLE ledger_daily (
	day VARCHAR(10) NOT NULL, 
	team_id VARCHAR(40) NOT NULL, 
	requested_model VARCHAR(200) NOT NULL, 
	served_model VARCHAR(200) NOT NULL, 
	cache_status VARCHAR(16) NOT NULL, 
	requests INTEGER NOT NULL, 
	errors INTEGER NOT NULL, 
	prompt_tokens BIGINT NOT NULL, 
	completion_tokens BIGINT NOT NULL, 
	cost_pusd BIGINT NOT NULL, 
	saved_pusd BIGINT NOT NULL, 
	PRIMARY KEY (day, team_id, requested_model, served_model, cache_status)
);
CREATE TABLE ledger_rollup (
	name VARCHAR(40) NOT NULL, 
	rolled_until FLOAT NOT NULL, 
	PRIMARY KEY (name)
);
CREATE TABLE dashboard_sessions (
	id_hash VARCHAR(64) NOT NULL, 
	created_at FLOAT NOT NULL, 
	expires_at FLOAT NOT NULL, 
	PRIMARY KEY (id_hash)
);
CREATE INDEX ix_dashboard_sessions_expires_at ON dashboard_sessions (expires_at);
CREATE TABLE budgets (
	id VARCHAR(40) NOT NULL, 
	scope VARCHAR(8) NOT NULL, 
	subject VARCHAR(200) NOT NULL, 
	period VARCHAR(8) NOT NULL, 
	amount_pusd BIGINT NOT NULL, 
	alert_at TEXT NOT NULL, 
	created_at FLOAT NOT NULL, 
	updated_at FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_budget_subject_period UNIQUE (scope, subject, period)
);
CREATE TABLE stored_responses (
	id VARCHAR(64) NOT NULL, 
	team_id VARCHAR(40) NOT NULL, 
	previous_response_id VARCHAR(64), 
	created_at FLOAT NOT NULL, 
	expires_at FLOAT NOT NULL, 
	bytes INTEGER NOT NULL, 
	data TEXT NOT NULL, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_stored_responses_team_created ON stored_responses (team_id, created_at);
CREATE INDEX ix_stored_responses_expires ON stored_responses (expires_at);
CREATE TABLE batches (
	id VARCHAR(64) NOT NULL, 
	team_id VARCHAR(40) NOT NULL, 
	key_id VARCHAR(40) NOT NULL, 
	endpoint VARCHAR(64) NOT NULL, 
	input_file_id VARCHAR(64) NOT NULL, 
	completion_window VARCHAR(16) NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	total INTEGER NOT NULL, 
	metadata TEXT, 
	errors TEXT, 
	output_file_id VARCHAR(64), 
	error_file_id VARCHAR(64), 
	created_at FLOAT NOT NULL, 
	expires_at FLOAT NOT NULL, 
	in_progress_at FLOAT, 
	finalizing_at FLOAT, 
	completed_at FLOAT, 
	failed_at FLOAT, 
	expired_at FLOAT, 
	cancelling_at FLOAT, 
	cancelled_at FLOAT, 
	lease_owner VARCHAR(40), 
	lease_until FLOAT, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_batches_team_created ON batches (team_id, created_at);
CREATE INDEX ix_batches_status ON batches (status);
CREATE TABLE batch_results (
	batch_id VARCHAR(64) NOT NULL, 
	line INTEGER NOT NULL, 
	custom_id VARCHAR(512) NOT NULL, 
	request_id VARCHAR(64) NOT NULL, 
	status_code INTEGER NOT NULL, 
	body TEXT NOT NULL, 
	prompt_tokens INTEGER NOT NULL, 
	completion_tokens INTEGER NOT NULL, 
	cached_tokens INTEGER NOT NULL, 
	cost_pusd BIGINT NOT NULL, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (batch_id, line)
);
CREATE TABLE files (
	id VARCHAR(64) NOT NULL, 
	team_id VARCHAR(40) NOT NULL, 
	key_id VARCHAR(40), 
	filename VARCHAR(500) NOT NULL, 
	purpose VARCHAR(32) NOT NULL, 
	bytes BIGINT NOT NULL, 
	created_at FLOAT NOT NULL, 
	expires_at FLOAT, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_files_team_created ON files (team_id, created_at);
CREATE TABLE feedback (
	request_id VARCHAR(40) NOT NULL, 
	team_id VARCHAR(40) NOT NULL, 
	key_id VARCHAR(40), 
	reported_by VARCHAR(40) NOT NULL, 
	requested_model VARCHAR(200), 
	served_model VARCHAR(200), 
	cache_status VARCHAR(16) NOT NULL, 
	verdict VARCHAR(8) NOT NULL, 
	comment TEXT, 
	"query" TEXT, 
	stored TEXT, 
	requested_at FLOAT NOT NULL, 
	updated_at FLOAT NOT NULL, 
	PRIMARY KEY (request_id)
);
CREATE INDEX ix_feedback_model ON feedback (requested_model, requested_at);
CREATE INDEX ix_feedback_team ON feedback (team_id, requested_at);
CREATE TABLE distill_texts (
	id INTEGER NOT NULL, 
	"cascade" VARCHAR(200) NOT NULL, 
	source VARCHAR(16) NOT NULL, 
	request_id VARCHAR(64) NOT NULL, 
	team_id VARCHAR(40) NOT NULL, 
	team_name VARCHAR(200) NOT NULL, 
	served_model VARCHAR(200) NOT NULL, 
	created_at FLOAT NOT NULL, 
	messages TEXT NOT NULL, 
	answer TEXT NOT NULL, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_distill_texts_cascade ON distill_texts ("cascade", id);
CREATE TABLE cascade_samples (
	id INTEGER NOT NULL, 
	"cascade" VARCHAR(200) NOT NULL, 
	created_at FLOAT NOT NULL, 
	request_id VARCHAR(40), 
	confidences TEXT NOT NULL, 
	agrees TEXT NOT NULL, 
	features TEXT, 
	feature_set TEXT, 
	texts TEXT, 
	weight FLOAT, 
	PRIMARY KEY (id)
);
CREATE INDEX ix_cascade_samples_cascade ON cascade_samples ("cascade", id);
